"""Reading list filters from a query string: a value outside its set is reported, not used.

Shared by the per-example table (``training.insight.eval_table``) and the call traces
(``training.insight.trace_reads``): a hand-edited URL gets the list unfiltered by that key, and the
page says which parameter was ignored and why.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any


def one_of(
    query: Any,
    key: str,
    allowed: Collection[str],
    problems: list[str],
    default: str = "",
    normalize: Callable[[str], str] = str,
) -> str:
    """The value of ``key`` when ``normalize(value)`` is in ``allowed``; blank: ``default``.

    Anything else returns ``default`` and appends to ``problems`` a line that names the key,
    the value (cut at 20 characters) and the values allowed.

    Example:
        >>> problems = []
        >>> one_of({"sort": "zzz"}, "sort", ["index", "reward"], problems, default="index")
        'index'
        >>> problems
        ["sort 'zzz' is not one of index, reward"]
    """
    value = query.get(key, "").strip()
    if not value:
        return default
    if normalize(value) in allowed:
        return value
    problems.append(f"{key} {value[:20]!r} is not one of {', '.join(allowed)}")
    return default
