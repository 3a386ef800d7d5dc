"""One streaming pass over a file's rows that collects what the preview page shows.

Memory: per column a few counters, the first PREVIEW_ROWS rows, and 8 bytes per row for
duplicate detection (a 64-bit hash of each row in an ``array``, sorted at the end) —
not the rows themselves.
"""

import json
from array import array
from collections.abc import Iterable
from typing import Any

from datasets.ingest.columns import check_column_count
from datasets.ingest.errors import DatasetError
from datasets.ingest.fieldtypes import combine_kinds, display, is_empty, kind_of
from datasets.ingest.label_guess import DistinctValues
from datasets.ingest.records import Record

PREVIEW_ROWS = 20
PREVIEW_CHARS = 1000  # per value: the profile is stored as JSON, keep it small


def _count_duplicates(hashes: array) -> int:
    if len(hashes) < 2:
        return 0
    import numpy as np

    ordered = np.sort(np.frombuffer(hashes, dtype=np.int64))
    return int(np.count_nonzero(ordered[1:] == ordered[:-1]))


def profile_records(
    records: Iterable[Record], *, sniff_strings: bool, preview_rows: int = PREVIEW_ROWS
) -> dict[str, Any]:
    """Row count, columns with inferred types, empty counts and the label set they look like
    (``labels``: sorted values, or None), duplicates, first rows."""
    columns: dict[str, dict[str, Any]] = {}  # insertion order = first appearance
    preview: list[dict[str, Any]] = []
    hashes = array("q")
    rows = 0
    for record in records:
        rows += 1
        values = record.values
        for name, value in values.items():
            column = columns.get(name)
            if column is None:
                # JSON rows may each bring new keys: the limit is on all of them together.
                check_column_count(len(columns) + 1, record.line, "the file (all rows together)")
                column = columns[name] = {"filled": 0, "kinds": set(), "distinct": DistinctValues()}
            if not is_empty(value):
                column["filled"] += 1
                column["kinds"].add(kind_of(value, sniff_strings))
                column["distinct"].add(value)
        hashes.append(hash(json.dumps(values, sort_keys=True, ensure_ascii=False)))
        if len(preview) < preview_rows:
            preview.append(values)
    if rows == 0:
        raise DatasetError("The file has no rows: there is nothing to make a dataset from.")
    names = list(columns)
    return {
        "row_count": rows,
        "duplicate_rows": _count_duplicates(hashes),
        "columns": [
            {
                "name": name,
                "type": combine_kinds(columns[name]["kinds"]),
                "empty": rows - columns[name]["filled"],
                "nested": "json" in columns[name]["kinds"],
                # a text column with few distinct values: the mapping step offers a label set
                "labels": columns[name]["distinct"].labels(columns[name]["filled"])
                if combine_kinds(columns[name]["kinds"]) == "str"
                else None,
            }
            for name in names
        ],
        "preview": [[display(row.get(name))[:PREVIEW_CHARS] for name in names] for row in preview],
    }
