"""The dataset of a run streamed from the owner's own code: the rows its fit was given.

A fit running elsewhere (``callbacks.RemoteMonitor``) sends its rows already typed by the
program's data models, so there is no file to map: the fields are the program's, the rows
go in as they are (bounded), all in the training split, and the rows of its first
evaluation become the test split. The rows are also kept as a JSON Lines file, so the
dataset downloads and versions like an upload.
"""

from __future__ import annotations

import json
import numbers
from typing import Any

from django.core.files.base import ContentFile
from django.db import transaction

from datasets.ingest.fieldtypes import FIELD_TYPES
from datasets.models import Dataset, DatasetRow
from datasets.services import DatasetError

#: Rows kept of one fit (the engine's RemoteMonitor sends at most as many).
MAX_ROWS = 5000
#: Characters kept of one text value.
MAX_TEXT = 20_000
#: Characters of a field's name (as the upload's mapping allows).
MAX_NAME = 64


def create_from_rows(
    owner, name: str, rows: list[dict[str, Any]], fields: list[dict[str, Any]]
) -> Dataset:
    """A dataset holding ``rows`` (``{"inputs": {...}, "targets": {...}}``) as its training
    split; ``fields``: the program's, ``{"name", "role": "input" | "output", "type",
    "description", "choices"}`` (a target with ``choices`` is a label set)."""
    if any(
        not isinstance(row.get(part) or {}, dict) for row in rows for part in ("inputs", "targets")
    ):
        raise DatasetError('each row is {"inputs": {...}, "targets": {...}}')
    inputs = sorted({key for row in rows for key in (row.get("inputs") or {})})
    targets = sorted({key for row in rows for key in (row.get("targets") or {})})
    if not rows or not inputs or not targets:
        raise DatasetError("the fit sent no rows with inputs and targets")
    declared = {spec["name"]: spec for spec in fields}
    input_fields = [_spec(name, declared.get(name), target=False) for name in inputs]
    target_fields = [_spec(name, declared.get(name), target=True) for name in targets]
    stored = [_flat(row, inputs, targets) for row in rows[:MAX_ROWS]]
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in stored)
    with transaction.atomic():
        dataset = Dataset.objects.create(
            owner=owner,
            name=(name or "rows from code")[:200],
            description="The rows a fit in your own code was given.",
            source=Dataset.SOURCE_CODE,
            original_name="rows.jsonl",
            format="jsonl",
            size_bytes=len(text.encode("utf-8")),
            input_fields=input_fields,
            target_fields=target_fields,
            column_map={name: name for name in [*inputs, *targets]},
            test_ratio=0.2,
            stratify_by=next((f["name"] for f in target_fields if f.get("choices")), ""),
        )
        dataset.original_file.save("rows.jsonl", ContentFile(text.encode("utf-8")), save=False)
        DatasetRow.objects.bulk_create(
            [
                DatasetRow(dataset=dataset, index=index, data=data, split=DatasetRow.TRAIN)
                for index, data in enumerate(stored)
            ],
            batch_size=1000,
        )
        dataset.row_count = dataset.train_count = len(stored)
        dataset.save()
    return dataset


def add_test_rows(dataset: Dataset, rows: list[dict[str, Any]]) -> None:
    """Make ``rows`` the dataset's test split, once (a code dataset that has none yet)."""
    if dataset.source != Dataset.SOURCE_CODE or dataset.test_count:
        return
    inputs = [field["name"] for field in dataset.input_fields]
    targets = [field["name"] for field in dataset.target_fields]
    start = dataset.row_count
    stored = [_flat(row, inputs, targets) for row in rows[:MAX_ROWS]]
    with transaction.atomic():
        DatasetRow.objects.bulk_create(
            [
                DatasetRow(dataset=dataset, index=start + i, data=data, split=DatasetRow.TEST)
                for i, data in enumerate(stored)
            ],
            batch_size=1000,
        )
        dataset.test_count = len(stored)
        dataset.row_count = start + len(stored)
        dataset.save(update_fields=["test_count", "row_count"])


def _spec(name: str, declared: dict[str, Any] | None, target: bool) -> dict[str, Any]:
    if len(str(name)) > MAX_NAME:
        raise DatasetError(f"a field name has at most {MAX_NAME} characters: {str(name)[:80]!r}")
    declared = declared or {}
    kind = declared.get("type") if declared.get("type") in FIELD_TYPES else "str"
    spec = {"name": str(name), "type": kind, "description": declared.get("description") or ""}
    if target and declared.get("choices"):
        spec["choices"] = [str(choice) for choice in declared["choices"]]
    return spec


def _flat(row: dict[str, Any], inputs: list[str], targets: list[str]) -> dict[str, Any]:
    given = {**(row.get("inputs") or {}), **(row.get("targets") or {})}
    return {name: _value(given.get(name)) for name in [*inputs, *targets]}


def _value(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value) if abs(int(value)) < 2**63 else str(value)[:MAX_TEXT]
    if isinstance(value, numbers.Real):
        return value if float(value) == float(value) and abs(float(value)) < 1e300 else None
    if isinstance(value, list):
        return [str(item)[:MAX_TEXT] for item in value[:1000]]
    return str(value)[:MAX_TEXT]
