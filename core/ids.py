"""Ids read from a request's query or form: one rule for "a row id or nothing".

Why: ``"99999999999999999999999".isdigit()`` is true, and such a number sent to the database
as a primary key overflows its 64-bit column (PostgreSQL: "bigint out of range", a 500). An
id out of the column's range names no row: it is treated as none, and the page answers as
for any id that is not the user's.
"""

from __future__ import annotations

from typing import Any

#: The largest value of a BigAutoField (``DEFAULT_AUTO_FIELD``) or any 64-bit id column.
MAX_ID = 2**63 - 1


def as_id(value: Any) -> int | None:
    """``value`` as a row id (1..MAX_ID, digits only), else None."""
    text = str(value if value is not None else "").strip()
    if not text.isdigit() or len(text) > len(str(MAX_ID)):
        return None
    number = int(text)
    return number if 1 <= number <= MAX_ID else None
