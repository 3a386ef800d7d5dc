"""Datasets: list, read, upload (one request: the file, its mapping and its split)."""

from __future__ import annotations

import json
from typing import Any

from ninja import File, Form, Router, Schema
from ninja.files import UploadedFile

from api.errors import FieldError
from datasets import selectors, services
from datasets.ingest.errors import DatasetError
from datasets.ingest.mapping import LABEL_SET
from datasets.ingest.splitting import check_split_settings, check_test_ratio

router = Router(tags=["datasets"])


class DatasetOut(Schema):
    id: int
    name: str
    version: int
    rows: int
    train_rows: int
    test_rows: int
    input_fields: list[Any]
    target_fields: list[Any]
    created: str


def dataset_out(dataset) -> dict[str, Any]:
    return {
        "id": dataset.pk,
        "name": dataset.name,
        "version": dataset.version,
        "rows": dataset.row_count,
        "train_rows": dataset.train_count,
        "test_rows": dataset.test_count,
        "input_fields": dataset.input_fields,
        "target_fields": dataset.target_fields,
        "created": dataset.created.isoformat(),
    }


@router.get("/", response=list[DatasetOut], summary="Your datasets, newest first")
def list_datasets(request):
    return [dataset_out(d) for d in selectors.datasets_of(request.user)]


@router.get("/{int:dataset_id}", response=DatasetOut, summary="One of your datasets")
def get_dataset(request, dataset_id: int):
    return dataset_out(selectors.owned_dataset(request.user, dataset_id))


@router.post("/", response={201: DatasetOut}, summary="Upload a file as a dataset")
def upload_dataset(
    request,
    file: File[UploadedFile],
    name: Form[str],
    mapping: Form[str],
    test_ratio: Form[float] = 0.2,
    seed: Form[int] = 42,
    skip_incomplete: Form[bool] = False,
):
    """``mapping``: a JSON list, one entry per column kept, as the upload page's mapping
    step: ``[{"column": "text", "role": "input", "name": "text", "type": "str"},
    {"column": "label", "role": "target", "name": "label", "type": "label set"}]``
    (a label set's ``labels`` default to the ones the page proposes for the column). The
    same checks as the page; nothing is kept when one fails."""
    if not name.strip():
        raise FieldError("Give the dataset a name.", "name")
    try:
        check_test_ratio(test_ratio)
    except DatasetError as exc:
        raise FieldError(str(exc), "test_ratio") from None
    try:
        check_split_settings(test_ratio, seed)
    except DatasetError as exc:
        raise FieldError(str(exc), "seed") from None
    try:
        entries = json.loads(mapping)
    except json.JSONDecodeError as exc:
        raise FieldError(
            f"mapping is not JSON: {exc.msg} (position {exc.pos})", "mapping"
        ) from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise FieldError("mapping is a JSON list of objects, one per column kept", "mapping")
    try:
        upload = services.save_upload(request.user, file)
    except DatasetError as exc:
        raise FieldError(str(exc), "file") from None
    proposed = {c["name"]: c.get("labels") or [] for c in upload.profile["columns"]}
    for entry in entries:  # a label set without its labels: the ones the page proposes
        if entry.get("type") == LABEL_SET and not entry.get("labels"):
            entry["labels"] = proposed.get(str(entry.get("column", "")), [])
    try:
        dataset = services.create_dataset_from_upload(
            upload,
            name=name,
            mapping_entries=entries,
            test_ratio=test_ratio,
            seed=seed,
            skip_incomplete=skip_incomplete,
        )
    except DatasetError as exc:
        services.delete_upload(upload)
        raise FieldError(str(exc), "mapping") from None
    return 201, dataset_out(dataset)
