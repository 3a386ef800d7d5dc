"""JSON Lines rows as a stream: one JSON object per line, blank lines skipped."""

import json
from collections.abc import Iterable, Iterator
from typing import Any

from datasets.ingest.errors import DatasetError
from datasets.ingest.records import Record


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


def read_jsonl(lines: Iterable[str]) -> Iterator[Record]:
    for line_no, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
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
        if not isinstance(value, dict):
            raise DatasetError(
                f"Line {line_no} holds {describe_type(value)}, not a JSON object "
                '({"column": value, ...}).',
                line=line_no,
            )
        yield Record(line_no, value)
