"""Numbers read from a request's query or form: one rule for "a row id or nothing", and for
"a whole number or nothing".

Why: ``str.isdigit`` is no guard. ``"99999999999999999999999".isdigit()`` is true, and such a
number sent to the database as a primary key overflows its 64-bit column (PostgreSQL: "bigint
out of range", a 500); ``"²".isdigit()`` is true too, and ``int("²")`` raises. An id out of
the column's range names no row: it is treated as none, and the page answers as for any id
that is not the user's.
"""

from __future__ import annotations

from typing import Any

#: The largest value of a BigAutoField (``DEFAULT_AUTO_FIELD``) or any 64-bit id column.
MAX_ID = 2**63 - 1


def whole_number(value: Any, most_digits: int) -> int | None:
    """``value`` as a whole number written in 1..``most_digits`` ASCII digits, else None."""
    text = str(value if value is not None else "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > most_digits:
        return None
    return int(text)


def as_id(value: Any) -> int | None:
    """``value`` as a row id (1..MAX_ID, digits only), else None."""
    number = whole_number(value, len(str(MAX_ID)))
    return number if number is not None and 1 <= number <= MAX_ID else None
