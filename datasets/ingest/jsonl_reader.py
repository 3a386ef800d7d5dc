"""JSON Lines rows as a stream: one JSON object per line, blank lines skipped.

Each line is checked before it is decoded (nesting deeper than MAX_NESTING is refused:
json would recurse into a RecursionError) and after (a lone surrogate such as
``"\ud800"`` is refused: no page, download or database could show or store it).
"""

import json
from collections.abc import Iterable, Iterator
from typing import Any

from core.bounded_json import describe_surrogate, lone_surrogate, nesting_depth_exceeds
from datasets.ingest.errors import DatasetError
from datasets.ingest.records import Record

# Deepest nesting of a row's values (``{"a": [[1]]}`` is 3 deep); rows are flat in practice.
MAX_NESTING = 64


class DuplicateKeyError(ValueError):
    """Raised by ``object_pairs_hook`` when an object repeats a key."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json ``object_pairs_hook``: plain json.loads silently keeps the last duplicate."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return result


DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)


def describe_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def check_nesting(text: str, line: int, where: str) -> None:
    """Raise DatasetError if ``text`` nests deeper than MAX_NESTING (before decoding it)."""
    if nesting_depth_exceeds(text, MAX_NESTING) is not None:
        raise DatasetError(
            f"Line {line}: {where} is nested more than {MAX_NESTING} levels deep.", line=line
        )


def check_code_points(value: Any, text: str, line: int, where: str) -> None:
    """Raise DatasetError if a decoded string holds a lone surrogate."""
    bad = lone_surrogate(value, text)
    if bad is not None:
        raise DatasetError(
            f"Line {line}: {where} holds {describe_surrogate(bad)}. Remove or replace the "
            "\\uD800-\\uDFFF escape that is not part of a surrogate pair.",
            line=line,
        )


def read_jsonl(lines: Iterable[str]) -> Iterator[Record]:
    for line_no, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        check_nesting(text, line_no, "the JSON value")
        try:
            value = DECODER.decode(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"Malformed JSON on line {line_no}, column {exc.colno}: {exc.msg}.",
                line=line_no,
            ) from None
        except DuplicateKeyError as exc:
            raise DatasetError(
                f"Duplicate column name {exc.key!r} in the object on line {line_no}.",
                line=line_no,
            ) from None
        check_code_points(value, text, line_no, "the JSON value")
        if not isinstance(value, dict):
            raise DatasetError(
                f"Line {line_no} holds {describe_type(value)}, not a JSON object "
                '({"column": value, ...}).',
                line=line_no,
            )
        yield Record(line_no, value)
