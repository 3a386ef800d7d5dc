"""A JSON array of objects read incrementally: ``raw_decode`` over a sliding text buffer.

``json.load`` would hold the whole document (and every parsed row) in memory at once. Here
the buffer only ever holds the unparsed tail plus the item being decoded, so memory is
bounded by the largest single item (capped at MAX_ITEM_CHARS), whatever the file's size.
"""

import json
from collections.abc import Iterable, Iterator

from datasets.ingest.errors import DatasetError
from datasets.ingest.jsonl_reader import (
    DECODER,
    MAX_NESTING,
    DuplicateKeyError,
    check_code_points,
    check_nesting,
    describe_type,
)
from datasets.ingest.records import Record

MAX_ITEM_CHARS = 16 * 1024 * 1024
WHITESPACE = " \t\n\r"
# A decode error this close to the end of the buffer may just mean the item is cut off.
TRUNCATION_MARGIN = 32


class _Buffer:
    """The unparsed text, its position, and how many lines were dropped before it."""

    def __init__(self, chunks: Iterable[str]):
        self.chunks = iter(chunks)
        self.text = ""
        self.pos = 0
        self.lines_before = 0  # newlines in text already discarded
        self.eof = False
        # Newlines are counted lazily and incrementally: positions only move forward, so
        # each character is scanned once (a full count per item would be quadratic).
        self._counted_pos = 0
        self._counted_lines = 0

    def line_at(self, pos: int) -> int:
        if pos >= self._counted_pos:
            self._counted_lines += self.text.count("\n", self._counted_pos, pos)
            self._counted_pos = pos
            return self.lines_before + self._counted_lines + 1
        return self.lines_before + self.text.count("\n", 0, pos) + 1

    def more(self, at_least: int = 1) -> bool:
        """Drop consumed text and append at least ``at_least`` chars; False at end of file."""
        if self.eof:
            return False
        if self.pos:
            self.lines_before = self.line_at(self.pos) - 1
            self.text = self.text[self.pos :]
            self.pos = 0
            self._counted_pos = 0
            self._counted_lines = 0
        added: list[str] = []
        count = 0
        while count < at_least:
            chunk = next(self.chunks, None)
            if chunk is None:
                self.eof = True
                break
            added.append(chunk)
            count += len(chunk)
        if added:
            self.text += "".join(added)
        return bool(added)

    def peek(self) -> str:
        """Skip whitespace and return the next character ('' at end of file)."""
        while True:
            text, pos = self.text, self.pos
            while pos < len(text) and text[pos] in WHITESPACE:
                pos += 1
            self.pos = pos
            if pos < len(text):
                return text[pos]
            if not self.more():
                return ""


def _too_large(buf: _Buffer, index: int) -> DatasetError:
    line = buf.line_at(buf.pos)
    return DatasetError(
        f"Item {index + 1} of the JSON array (starting on line {line}) is larger than "
        f"{MAX_ITEM_CHARS:,} characters.",
        line=line,
    )


def _decode_item(buf: _Buffer, index: int):
    while True:
        try:
            value, end = DECODER.raw_decode(buf.text, buf.pos)
        except json.JSONDecodeError as exc:
            cut_off = exc.msg.startswith("Unterminated string") or (
                exc.pos >= len(buf.text) - TRUNCATION_MARGIN
            )
            if cut_off and not buf.eof:
                if len(buf.text) - buf.pos > MAX_ITEM_CHARS:
                    raise _too_large(buf, index) from None
                # Grow geometrically so a big item is re-parsed O(log n) times, not O(n).
                buf.more(at_least=max(64 * 1024, len(buf.text) - buf.pos))
                continue
            line = buf.line_at(exc.pos)
            raise DatasetError(
                f"Malformed JSON on line {line} (item {index + 1} of the array): {exc.msg}.",
                line=line,
            ) from None
        except (RecursionError, DuplicateKeyError) as exc:
            line = buf.line_at(buf.pos)
            if isinstance(exc, DuplicateKeyError):
                message = (
                    f"Duplicate column name {exc.key!r} in item {index + 1} of the JSON array "
                    f"(line {line})."
                )
            else:  # the item ends past json's recursion limit: far beyond MAX_NESTING
                message = (
                    f"Line {line}: item {index + 1} of the JSON array is nested more than "
                    f"{MAX_NESTING} levels deep."
                )
            raise DatasetError(message, line=line) from None
        if end - buf.pos > MAX_ITEM_CHARS:
            raise _too_large(buf, index)
        if (
            end >= len(buf.text) - TRUNCATION_MARGIN
            and not buf.eof
            and not isinstance(value, dict | list | str)
        ):
            # A number or literal ending at the buffer's end may continue in the next chunk.
            buf.more()
            continue
        return value, end


def read_json_array(chunks: Iterable[str]) -> Iterator[Record]:
    buf = _Buffer(chunks)
    first = buf.peek()
    if first != "[":
        if first == "":
            return
        line = buf.line_at(buf.pos)
        hint = " (one object per line is the JSON Lines format: name the file .jsonl)"
        raise DatasetError(
            f"A .json file must hold an array of objects, [{{...}}, ...]; this one starts "
            f"with {first!r} on line {line}" + (hint if first == "{" else "") + ".",
            line=line,
        )
    buf.pos += 1
    index = 0
    while True:
        char = buf.peek()
        if char == "]" and index == 0:
            buf.pos += 1
            break
        if char == "":
            line = buf.line_at(buf.pos)
            raise DatasetError(
                f"The JSON array is not closed: the file ends on line {line} without ']'.",
                line=line,
            )
        start_line = buf.line_at(buf.pos)
        value, end = _decode_item(buf, index)
        item_text = buf.text[buf.pos : end]
        where = f"item {index + 1} of the JSON array"
        check_nesting(item_text, start_line, where)
        check_code_points(value, item_text, start_line, where)
        if not isinstance(value, dict):
            raise DatasetError(
                f"Item {index + 1} of the JSON array (line {start_line}) is "
                f"{describe_type(value)}, not an object.",
                line=start_line,
            )
        buf.pos = end
        yield Record(start_line, value)
        index += 1
        char = buf.peek()
        if char == ",":
            buf.pos += 1
            continue
        if char == "]":
            buf.pos += 1
            break
        line = buf.line_at(buf.pos)
        found = repr(char) if char else "the end of the file"
        raise DatasetError(
            f"Malformed JSON on line {line}: expected ',' or ']' after item {index} "
            f"of the array, found {found}.",
            line=line,
        )
    char = buf.peek()
    if char:
        line = buf.line_at(buf.pos)
        raise DatasetError(
            f"Unexpected text after the end of the JSON array on line {line}.", line=line
        )
