"""Decode a binary stream chunk by chunk, and cut it into lines, with bounded memory.

Why not ``io.TextIOWrapper``: when a byte is not valid in the chosen encoding we must tell
the user the line and the byte offset, and TextIOWrapper's exception only knows the offset
inside its internal buffer. Here every byte fed to the incremental decoder is counted, so a
``UnicodeDecodeError`` maps back to an absolute position in the file.
"""

import codecs
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from datasets.ingest.errors import DatasetError

CHUNK_BYTES = 256 * 1024
# Longest line we accept (characters). Bounds memory for files without newlines.
MAX_LINE_CHARS = 16 * 1024 * 1024

ENCODINGS = {
    "utf-8": "UTF-8",
    "utf-16": "UTF-16 (with byte-order mark)",
    "latin-1": "Latin-1 (ISO-8859-1)",
    "cp1252": "Windows-1252",
}


def iter_text_chunks(
    stream: BinaryIO, encoding: str = "utf-8", chunk_bytes: int = CHUNK_BYTES
) -> Iterator[str]:
    """Yield decoded text chunks; raise DatasetError naming line and byte of a bad byte."""
    try:
        decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    except LookupError:
        raise DatasetError(f"Unknown text encoding {encoding!r}.") from None
    fed = 0  # bytes handed to the decoder so far
    newlines = 0  # newlines in the text decoded so far
    at_start = True
    while True:
        raw = stream.read(chunk_bytes)
        final = not raw
        pending = len(decoder.getstate()[0])  # undecoded bytes carried from the last chunk
        try:
            text = decoder.decode(raw, final)
        except UnicodeDecodeError as exc:
            # exc.object is the carried bytes + this chunk; exc.start indexes into it.
            offset = fed - pending + exc.start
            good = exc.object[: exc.start].decode(encoding, errors="replace")
            line = newlines + good.count("\n") + 1
            bad = exc.object[exc.start : exc.start + 1].hex()
            raise DatasetError(
                f"The file is not valid {ENCODINGS.get(encoding, encoding)}: "
                f"byte 0x{bad} at line {line}, byte offset {offset} ({exc.reason}). "
                "Save the file as UTF-8, or choose its encoding when uploading.",
                line=line,
                byte=offset,
            ) from None
        if at_start and text:
            at_start = False
            if text.startswith("\ufeff"):
                text = text[1:]  # a byte-order mark (Excel writes one) is not data
        fed += len(raw)
        if text:
            newlines += text.count("\n")
            yield text
        if final:
            return


def iter_lines(chunks: Iterable[str], max_line_chars: int = MAX_LINE_CHARS) -> Iterator[str]:
    """Yield lines (each keeping its ``\\n``; the last may lack it) from text chunks."""
    pending: list[str] = []
    pending_len = 0
    line_no = 0
    for chunk in chunks:
        if "\n" not in chunk:
            pending.append(chunk)
            pending_len += len(chunk)
            if pending_len > max_line_chars:
                raise DatasetError(
                    f"Line {line_no + 1} is longer than {max_line_chars:,} characters; "
                    "is this really a line-based text file?",
                    line=line_no + 1,
                )
            continue
        pending.append(chunk)
        data = "".join(pending)
        parts = data.split("\n")
        tail = parts.pop()
        for part in parts:
            line_no += 1
            if len(part) > max_line_chars:
                raise DatasetError(
                    f"Line {line_no} is longer than {max_line_chars:,} characters.",
                    line=line_no,
                )
            yield part + "\n"
        pending = [tail] if tail else []
        pending_len = len(tail)
    if pending:
        yield "".join(pending)
