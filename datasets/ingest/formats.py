"""Which formats we read, how a file's format is chosen, and one entry point to read any."""

import os
from collections.abc import Iterator
from typing import BinaryIO

from datasets.ingest.csv_reader import read_delimited
from datasets.ingest.errors import DatasetError
from datasets.ingest.json_array_reader import read_json_array
from datasets.ingest.jsonl_reader import read_jsonl
from datasets.ingest.records import Record
from datasets.ingest.textstream import iter_lines, iter_text_chunks

FORMATS = {
    "csv": "CSV (comma-separated, header row)",
    "tsv": "TSV (tab-separated, header row)",
    "jsonl": "JSON Lines (one object per line)",
    "json": "JSON (an array of objects)",
}
EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
}


def detect_format(filename: str, requested: str = "") -> str:
    """The requested format if given, else the one the file name's extension implies."""
    if requested:
        if requested not in FORMATS:
            raise DatasetError(f"Unknown format {requested!r}; choose one of {', '.join(FORMATS)}.")
        return requested
    extension = os.path.splitext(filename.lower())[1]
    if extension in EXTENSIONS:
        return EXTENSIONS[extension]
    accepted = ", ".join(EXTENSIONS)
    raise DatasetError(
        f"Cannot tell the format of {filename!r} from its name: use one of {accepted}, "
        "or choose the format when uploading."
    )


def iter_records(stream: BinaryIO, fmt: str, encoding: str = "utf-8") -> Iterator[Record]:
    """Yield the rows of a binary stream in the given format, in file order."""
    chunks = iter_text_chunks(stream, encoding)
    if fmt == "csv":
        return read_delimited(iter_lines(chunks), ",")
    if fmt == "tsv":
        return read_delimited(iter_lines(chunks), "\t")
    if fmt == "jsonl":
        return read_jsonl(iter_lines(chunks))
    if fmt == "json":
        return read_json_array(chunks)
    raise DatasetError(f"Unknown format {fmt!r}.")
