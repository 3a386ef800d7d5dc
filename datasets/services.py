"""Dataset operations other parts call: save and profile an upload, create a dataset from
it, import a built-in, read a split, stream rows out, delete safely.

Views stay thin and call these. Every failure a user can cause raises DatasetError (from
datasets.ingest) with a message meant for them; nothing is left saved when it does.
"""

import itertools
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from datetime import timedelta
from typing import Any, BinaryIO

import numpy as np
from django.conf import settings
from django.core.files import File
from django.db import models, transaction
from django.utils import timezone
from django.utils.text import get_valid_filename

from datasets.builtins import BUILTINS
from datasets.ingest import DatasetError, detect_format, iter_records
from datasets.ingest.mapping import MappedRows, Mapping, validate_mapping
from datasets.ingest.profile import profile_records
from datasets.ingest.records import Record
from datasets.ingest.splitting import (
    check_split_settings,
    split_mask,
    stratified_split_mask,
    training_order,
)
from datasets.models import Dataset, DatasetRow, Upload
from datasets.selectors import runs_using

logger = logging.getLogger(__name__)

INSERT_BATCH = 1000
UPDATE_BATCH = 500  # keeps "index IN (...)" under SQLite's variable limit
DELETE_BATCH = 5000  # rows deleted per transaction when an import is discarded
STALE_UPLOAD_AGE = timedelta(days=1)
SPLITS = (DatasetRow.TRAIN, DatasetRow.TEST)

__all__ = [
    "DatasetError",
    "DatasetInUse",
    "create_dataset_from_upload",
    "create_demo_dataset",
    "delete_dataset",
    "delete_upload",
    "get_split",
    "import_builtin",
    "iter_jsonl",
    "preview_mapping",
    "runs_using",
    "save_upload",
    "upload_max_bytes",
]


class DatasetInUse(Exception):
    """Deleting was refused because something (a run) still needs the dataset."""


def upload_max_bytes() -> int:
    """TRAINBOARD_UPLOAD_MAX_BYTES, defined once in settings (the server enforces it too)."""
    return settings.TRAINBOARD_UPLOAD_MAX_BYTES


def too_large_message(limit: int) -> str:
    return f"The file is larger than the upload limit of {limit / 1024 / 1024:.0f} MB."


def sniffs_strings(fmt: str) -> bool:
    return fmt in ("csv", "tsv")


def profile_stream(stream: BinaryIO, fmt: str, encoding: str) -> dict[str, Any]:
    return profile_records(iter_records(stream, fmt, encoding), sniff_strings=sniffs_strings(fmt))


def _safe_filename(name: str, default: str) -> str:
    base = get_valid_filename(os.path.basename(name or "")) or default
    stem, ext = os.path.splitext(base)
    return stem[:80] + ext[:10]


# --- uploads ----------------------------------------------------------------------------


def save_upload(user, uploaded_file, requested_format: str = "", encoding: str = "utf-8") -> Upload:
    """Profile an uploaded file in one streaming pass, then keep it as a pending Upload."""
    limit = upload_max_bytes()
    if uploaded_file.size is not None and uploaded_file.size > limit:
        raise DatasetError(too_large_message(limit))
    fmt = detect_format(uploaded_file.name or "", requested_format)
    uploaded_file.seek(0)
    profile = profile_stream(uploaded_file, fmt, encoding)
    uploaded_file.seek(0)
    discard_stale_uploads(user)
    discard_abandoned_imports()
    upload = Upload(
        owner=user,
        original_name=(uploaded_file.name or "upload")[:255],
        format=fmt,
        encoding=encoding,
        size_bytes=uploaded_file.size or 0,
        profile=profile,
    )
    upload.file.save(_safe_filename(uploaded_file.name, f"upload.{fmt}"), uploaded_file, save=False)
    try:
        upload.save()
    except Exception:
        upload.file.delete(save=False)
        raise
    return upload


def delete_upload(upload: Upload) -> None:
    upload.file.delete(save=False)
    upload.delete()


def discard_stale_uploads(user) -> None:
    """Uploads never turned into datasets are dropped after a day, file included."""
    for upload in Upload.objects.filter(owner=user, created__lt=timezone.now() - STALE_UPLOAD_AGE):
        delete_upload(upload)


# --- creating datasets -----------------------------------------------------------------


def _check_settings(name: str, test_ratio: float, seed: int) -> None:
    if not name.strip():
        raise DatasetError("Give the dataset a name.")
    check_split_settings(test_ratio, seed)


def _store_rows(dataset: Dataset, rows: Iterable[dict[str, Any]]) -> int:
    """Insert rows in chunks, each its own short transaction, then mark the test split
    (stratified by the first label-set target, when there is one).

    Never one transaction around it all: on SQLite that held the only write lock for the
    whole parse (81 s for a 1M-row file), and every heartbeat, login and run update waited
    behind it or failed. Rows are read and converted between chunks, outside any lock.
    """
    batch: list[DatasetRow] = []
    count = 0
    # A label-set target (declared at the mapping step) splits stratified by default: each
    # label keeps its share in train and test. One reference per row to an interned label.
    stratify_by = next((f["name"] for f in dataset.target_fields if f.get("choices")), "")
    labels: list[Any] = []
    for data in rows:
        batch.append(DatasetRow(dataset=dataset, index=count, data=data))
        if stratify_by:
            labels.append(data.get(stratify_by))
        count += 1
        if len(batch) >= INSERT_BATCH:
            _insert_chunk(batch)
            batch = []
    if batch:
        _insert_chunk(batch)
    if count == 0:
        raise DatasetError("No rows are left once incomplete rows are skipped.")
    if stratify_by:
        mask = stratified_split_mask(labels, dataset.test_ratio, dataset.seed)
        dataset.stratify_by = stratify_by
    else:
        mask = split_mask(count, dataset.test_ratio, dataset.seed)
    test_indices = np.flatnonzero(mask).tolist()
    for start in range(0, len(test_indices), UPDATE_BATCH):
        DatasetRow.objects.filter(
            dataset=dataset, index__in=test_indices[start : start + UPDATE_BATCH]
        ).update(split=DatasetRow.TEST)
    dataset.row_count = count
    dataset.test_count = len(test_indices)
    dataset.train_count = count - len(test_indices)
    return count


def _insert_chunk(batch: list[DatasetRow]) -> None:
    with transaction.atomic():
        DatasetRow.objects.bulk_create(batch)


def _discard_rows(dataset: Dataset) -> None:
    """Delete a dataset's rows by index range, DELETE_BATCH per short transaction."""
    last = DatasetRow.objects.filter(dataset=dataset).aggregate(last=models.Max("index"))["last"]
    if last is None:
        return
    for start in range(0, last + 1, DELETE_BATCH):
        DatasetRow.objects.filter(
            dataset=dataset, index__gte=start, index__lt=start + DELETE_BATCH
        ).delete()


def _discard_import(dataset: Dataset) -> None:
    """Remove what a failed or abandoned import wrote: its rows, then the dataset row."""
    _discard_rows(dataset)
    Dataset.all_objects.filter(pk=dataset.pk, importing=True).delete()


def discard_abandoned_imports() -> None:
    """Imports still unfinished after STALE_UPLOAD_AGE died with their process: drop them."""
    cutoff = timezone.now() - STALE_UPLOAD_AGE
    for dataset in Dataset.all_objects.filter(importing=True, created__lt=cutoff):
        _discard_import(dataset)


def transformed(
    records: Iterable[Record], transform: Callable[[dict], dict] | None
) -> Iterator[Record]:
    """Apply a built-in's row transform, turning its errors into DatasetErrors."""
    for record in records:
        if transform is None:
            yield record
            continue
        try:
            yield Record(record.line, transform(record.values))
        except (ValueError, TypeError) as exc:
            raise DatasetError(f"Line {record.line}: {exc}.", line=record.line) from None


def _build_dataset(
    open_stream: Callable[[], BinaryIO],
    mapping: Mapping,
    skip_incomplete: bool,
    transform: Callable[[dict], dict] | None = None,
    **fields: Any,
) -> Dataset:
    """Create the Dataset as ``importing``, write its rows chunk by chunk, then publish it.

    The dataset becomes visible (``importing=False``, with its counts) in the one short
    write after the last chunk. Any error, or an interrupt, deletes what was written,
    chunk by chunk too: nothing half-made is ever shown or used.
    """
    dataset = Dataset.all_objects.create(
        importing=True,
        input_fields=mapping.input_fields,
        target_fields=mapping.target_fields,
        column_map=mapping.columns,
        **fields,
    )
    try:
        with closing(open_stream()) as stream:
            records = iter_records(stream, dataset.format, dataset.encoding)
            rows = MappedRows(transformed(records, transform), mapping, skip_incomplete)
            _store_rows(dataset, rows)
        dataset.skipped_rows = rows.skipped
        dataset.importing = False
        dataset.save()
    except BaseException:
        try:
            _discard_import(dataset)
        except Exception:  # the database itself failing: the original error is the one to see
            logger.exception("dataset %s: the failed import could not be removed", dataset.pk)
        raise
    return dataset


def preview_mapping(
    upload: Upload,
    mapping_entries: list[dict[str, Any]],
    skip_incomplete: bool = False,
    limit: int = 5,
) -> tuple[Mapping, list[dict[str, Any]]]:
    """The first ``limit`` rows of ``upload`` as this mapping would store them.

    The same validation and conversion as ``create_dataset_from_upload``, stopped after
    ``limit`` rows and storing nothing. Raises DatasetError, with the user's message, for a
    bad mapping or a value that does not convert.

    Returns:
        (mapping, rows): the validated mapping and the converted rows.
    """
    mapping = validate_mapping(mapping_entries, upload.columns)
    with closing(upload.file.open("rb")) as stream:
        records = iter_records(stream, upload.format, upload.encoding)
        rows = list(itertools.islice(MappedRows(records, mapping, skip_incomplete), limit))
    return mapping, rows


def create_dataset_from_upload(
    upload: Upload,
    *,
    name: str,
    mapping_entries: list[dict[str, Any]],
    description: str = "",
    test_ratio: float = 0.2,
    seed: int = 42,
    skip_incomplete: bool = False,
) -> Dataset:
    """Validate the mapping, convert and store every row with its split; keep the file."""
    _check_settings(name, test_ratio, seed)
    mapping = validate_mapping(mapping_entries, upload.columns)
    stats = {key: value for key, value in upload.profile.items() if key != "preview"}
    dataset = _build_dataset(
        lambda: upload.file.open("rb"),
        mapping,
        skip_incomplete,
        owner=upload.owner,
        name=name.strip()[:200],
        description=description.strip(),
        source=Dataset.SOURCE_UPLOAD,
        original_file=upload.file.name,  # the dataset takes over the stored file
        original_name=upload.original_name,
        format=upload.format,
        encoding=upload.encoding,
        size_bytes=upload.size_bytes,
        test_ratio=float(test_ratio),
        seed=int(seed),
        stats=stats,
    )
    upload.delete()  # the row only; the file now belongs to the dataset
    return dataset


def import_builtin(user, key: str) -> Dataset:
    """Import a shipped dataset for ``user``; returns the existing one if already imported."""
    spec = BUILTINS.get(key)
    if spec is None:
        raise DatasetError(f"There is no built-in dataset {key!r}.")
    existing = Dataset.objects.filter(owner=user, builtin_key=key).first()
    if existing is not None:
        return existing
    with open(spec.path, "rb") as stream:
        records = transformed(iter_records(stream, "jsonl"), spec.transform)
        profile = profile_records(records, sniff_strings=False)
    entries = [
        {**field, "column": field["name"], "role": role}
        for role, fields in (("input", spec.input_fields), ("target", spec.target_fields))
        for field in fields
    ]
    mapping = validate_mapping(entries, [column["name"] for column in profile["columns"]])
    stored = Dataset(owner=user)
    with open(spec.path, "rb") as source:
        stored.original_file.save(f"{key}-{spec.path.name}", File(source), save=False)
    try:
        return _build_dataset(
            lambda: stored.original_file.open("rb"),
            mapping,
            False,
            spec.transform,
            owner=user,
            name=spec.name,
            description=spec.description,
            source=Dataset.SOURCE_BUILTIN,
            builtin_key=key,
            original_file=stored.original_file.name,
            original_name=spec.path.name,
            format="jsonl",
            size_bytes=spec.path.stat().st_size,
            test_ratio=spec.test_ratio,
            seed=spec.seed,
            stats={k: v for k, v in profile.items() if k != "preview"},
        )
    except Exception:
        stored.original_file.delete(save=False)
        raise


def create_demo_dataset(user) -> Dataset:
    """The demo dataset a new user starts with (idempotent; ``make run`` calls it)."""
    return import_builtin(user, "demo")


# --- reading ----------------------------------------------------------------------------


def get_split(
    dataset: Dataset, split: str, spread_by_label: bool = True
) -> tuple[list[dict], list[dict]]:
    """The stored split as (inputs, targets): parallel lists of dicts, the test split in row
    order, the training split in the order ``fit`` receives it (:func:`training_rows`)."""
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    input_names, target_names = dataset.input_names, dataset.target_names
    inputs: list[dict] = []
    targets: list[dict] = []
    if split == DatasetRow.TRAIN:
        rows = [data for _, data in training_rows(dataset, spread_by_label)]
    else:
        rows = dataset.rows.filter(split=split).order_by("index").values_list("data", flat=True)
        rows = rows.iterator(chunk_size=2000)
    for data in rows:
        inputs.append({name: data.get(name) for name in input_names})
        targets.append({name: data.get(name) for name in target_names})
    return inputs, targets


def training_rows(dataset: Dataset, spread_by_label: bool = True) -> list[tuple[int, dict]]:
    """``(DatasetRow.index, data)`` of the training split in the order a run's ``fit``
    receives them. With a label set (``stratify_by``), spread by label and seeded by the
    dataset's seed (``splitting.training_order``): the validation split fit cuts off the end
    holds every label in its share, whatever order the file was in. Without one, or with
    ``spread_by_label=False`` (a run launched before runs spread them: its config says so,
    ``run_config.spreads_by_label``), in file order (the guide's rule: validation is the end
    of what fit is given). One order for the run and for the pages that find its validation
    rows again."""
    rows = list(
        dataset.rows.filter(split=DatasetRow.TRAIN).order_by("index").values_list("index", "data")
    )
    if not dataset.stratify_by or not spread_by_label:
        return rows
    labels = [(data or {}).get(dataset.stratify_by) for _, data in rows]
    return [rows[position] for position in training_order(labels, dataset.seed)]


def iter_jsonl(dataset: Dataset, split: str | None = None) -> Iterator[bytes]:
    """The dataset's rows as JSON Lines (fields in schema order), streamed from the DB."""
    names = dataset.input_names + dataset.target_names
    rows = dataset.rows.order_by("index")
    if split:
        rows = rows.filter(split=split)
    for data in rows.values_list("data", flat=True).iterator(chunk_size=2000):
        ordered = {name: data.get(name) for name in names}
        yield (json.dumps(ordered, ensure_ascii=False) + "\n").encode("utf-8")


# --- deleting ---------------------------------------------------------------------------


def _describe_run(run) -> str:
    status = getattr(run, "status", "")
    return f"#{run.pk} {status}".strip()


def delete_dataset(dataset: Dataset) -> None:
    """Delete a dataset, its rows and its file; refuse while a run uses it."""
    runs = runs_using(dataset)
    count = runs.count()
    if count:
        shown = ", ".join(_describe_run(run) for run in runs.order_by("-pk")[:5])
        raise DatasetInUse(
            f"“{dataset.name}” cannot be deleted: {count} run{'s' if count != 1 else ''} "
            f"use{'s' if count == 1 else ''} it ({shown}). Delete those runs first."
        )
    from datasets.versions import shares_file  # versions share their line's original file

    file_name = "" if shares_file(dataset) else dataset.original_file.name
    storage = dataset.original_file.storage
    try:
        with transaction.atomic():
            dataset.delete()
            if file_name:
                transaction.on_commit(lambda: storage.delete(file_name))
    except (models.ProtectedError, models.RestrictedError) as exc:
        blocking = getattr(exc, "protected_objects", None) or getattr(exc, "restricted_objects", ())
        users = sorted({f"{obj._meta.verbose_name} #{obj.pk}" for obj in blocking})[:5]
        raise DatasetInUse(
            f"“{dataset.name}” cannot be deleted: it is still used by {', '.join(users)}."
        ) from None
