"""CSV and TSV rows as a stream: the csv module over decoded lines, header first.

A header row is required; names must be present and distinct, at most MAX_COLUMNS of them
(datasets.ingest.columns). Every later row must have
as many values as the header (a "ragged" row is an error naming its line). Blank lines are
skipped. Values stay strings; types are inferred later.
"""

import csv
from collections.abc import Iterable, Iterator

from datasets.ingest.columns import check_column_count
from datasets.ingest.errors import DatasetError
from datasets.ingest.records import Record


def check_header(names: list[str], line: int = 1) -> list[str]:
    """Strip the names and refuse too many, empty or repeated ones."""
    check_column_count(len(names), line, "the header")
    names = [name.strip() for name in names]
    seen: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        if not name:
            raise DatasetError(
                f"Column {position} of the header (line {line}) has no name.", line=line
            )
        if name in seen:
            raise DatasetError(
                f"Duplicate column name {name!r} in the header (line {line}): "
                f"columns {seen[name]} and {position}. Column names must be unique.",
                line=line,
            )
        seen[name] = position
    return names


def read_delimited(lines: Iterable[str], delimiter: str) -> Iterator[Record]:
    """Yield one Record per data row; raise DatasetError on a bad header or ragged row."""
    # strict: an unclosed quote is an error instead of silently swallowing the rest of the file
    reader = csv.reader(lines, delimiter=delimiter, strict=True)
    header: list[str] | None = None
    header_line = 1
    previous_end = 0  # reader.line_num after the previous row
    kind = "TSV" if delimiter == "\t" else "CSV"
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            line = previous_end + 1
            raise DatasetError(f"{kind} line {line} cannot be read: {exc}.", line=line) from None
        start = previous_end + 1
        previous_end = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # blank line
        if header is None:
            header_line = start
            header = check_header(row, line=start)
            continue
        if len(row) != len(header):
            raise DatasetError(
                f"{kind} line {start} has {len(row)} value{'s' if len(row) != 1 else ''} "
                f"but the header (line {header_line}) has {len(header)} columns.",
                line=start,
            )
        yield Record(start, dict(zip(header, row, strict=True)))
