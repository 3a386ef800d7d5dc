"""JSON from untrusted text, checked before and after decoding.

Uploads (dataset JSON Lines / JSON arrays) and imported programs are untrusted. Python's
``json`` module recurses once per nesting level (100,000 ``[`` end in RecursionError),
accepts ``NaN``/``Infinity`` (which no database JSON column stores), and turns a lone
``"\\ud800"`` escape into a string no UTF-8 encoder can write (every page showing it then
fails). The checks here are cheap where the input is ordinary: nesting is only scanned
when the text holds more brackets than the limit, and strings are only searched for
surrogates when the text holds a ``\\uD800``-``\\uDFFF`` escape.

Pure Python, no Django import: ``datasets.ingest`` uses it too.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

# A JSON string (its brackets do not count), written so the regex engine never backtracks;
# then the brackets left.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
# A JSON escape of a UTF-16 surrogate; a valid pair decodes to one ordinary character.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


class UnsafeJSON(ValueError):
    """The text is JSON we refuse to work with; ``str()`` says why (and where, if known)."""


def nesting_depth_exceeds(text: str, limit: int) -> int | None:
    """The line where nesting first goes deeper than ``limit``, else None.

    Args:
        text: the JSON text, not yet decoded.
        limit: the deepest nesting allowed (``[[1]]`` is 2 deep).

    Returns:
        None when the text stays within the limit (always, and without a scan, when it
        holds no more than ``limit`` opening brackets), else the 1-based line number.
    """
    if text.count("[") + text.count("{") <= limit:
        return None
    # Strings hold no raw newline in JSON: emptying them keeps every line where it was.
    blanked = _STRING.sub('""', text)
    depth = 0
    for match in _BRACKET.finditer(blanked):
        if match.group() in "[{":
            depth += 1
            if depth > limit:
                return blanked.count("\n", 0, match.start()) + 1
        else:
            depth -= 1
    return None


def refuse_constant(name: str) -> Any:
    """``parse_constant`` hook for json: NaN, Infinity and -Infinity are not numbers we store."""
    raise UnsafeJSON(f"{name} is not a number JSON allows (write a finite number or null)")


def lone_surrogate(value: Any, text: str) -> str | None:
    """The first string (key or value) in ``value`` holding a lone surrogate, else None.

    ``text`` is the JSON it was decoded from: without a surrogate escape in it, no string
    can hold one (decoded UTF-8 never does), so nothing is walked.
    """
    if not _SURROGATE_ESCAPE.search(text):
        return None
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return node
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def describe_surrogate(string: str) -> str:
    """Words for a message: which code point, and a little of the string around it."""
    match = _SURROGATE.search(string)
    code = f"U+{ord(match.group()):04X}" if match else "a surrogate"
    shown = string.encode("utf-8", "backslashreplace").decode("utf-8")
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{code}, a lone UTF-16 surrogate that is not a character (in {shown!r})"


def non_finite_path(value: Any, path: str = "") -> str | None:
    """The path ("a.b[2]") of the first NaN or infinite float in ``value``, else None."""
    stack = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return where or "(the document)"
        if isinstance(node, dict):
            stack.extend(
                (child, f"{where}.{key}" if where else str(key)) for key, child in node.items()
            )
        elif isinstance(node, list):
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(node))
    return None


def loads_bounded(raw: bytes, max_bytes: int, max_nesting: int) -> Any:
    """``raw`` (a request body) as JSON, refused with UnsafeJSON saying why when it is larger
    than ``max_bytes``, nests deeper than ``max_nesting``, is not JSON, holds NaN/Infinity or
    a lone surrogate: every check before any work is done with it."""
    if len(raw) > max_bytes:
        raise UnsafeJSON(f"the body is larger than {max_bytes // 1024} KB")
    text = raw.decode("utf-8", "replace")
    if nesting_depth_exceeds(text, max_nesting) is not None:
        raise UnsafeJSON(f"the body nests deeper than {max_nesting} levels")
    try:
        value = json.loads(text, parse_constant=refuse_constant)
    except json.JSONDecodeError as exc:
        raise UnsafeJSON(f"the body is not JSON: {exc.msg} (position {exc.pos})") from None
    string = lone_surrogate(value, text)
    if string is not None:
        raise UnsafeJSON(f"the body holds {describe_surrogate(string)}")
    return value
