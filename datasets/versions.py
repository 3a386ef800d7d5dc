"""Dataset versions: people correct rows, and the corrections become a new version.

A correction is about one row of one dataset version, identified by its ``DatasetRow.index``
(the same in every version of a line): the right answer typed in, or a prediction marked
right or wrong. Corrections wait as the author's draft (``DatasetChange`` rows without a
version) until they publish it; publishing copies the base version into a new ``Dataset``
(``parent`` = the base, ``root`` = the first of the line, ``version`` = the line's next
number), writes the typed answers into the copied rows and the marks into ``Dataset.marks``,
and attaches the changes as the new version's change log. The base stays as it was, and runs
keep the version they were launched on; a run launched on the new version reads the
corrected rows (``get_split``) and, with "judge by people", its marks (``human_marks``).

Reads and writes of one user's own datasets only: callers pass a dataset already checked
with ``selectors.owned_dataset``; a run given as the source is checked here.

Example:

    versions.record(user, dataset, row_index=3, kind="answer", answer={"team": "billing"})
    versions.record(user, dataset, row_index=5, kind="right", predicted={"team": "sales"})
    new = versions.publish(user, dataset)          # "Support tickets v2", 2 changes
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.apps import apps
from django.db import connection, transaction
from django.db.models import Max, Q, QuerySet

from datasets.ingest import DatasetError
from datasets.ingest.fieldtypes import ConversionError, convert, is_empty
from datasets.models import Dataset, DatasetChange, DatasetRow
from training.engine.rewards.human_marks import MAX_MARKS  # a version's marks: the reward's cap

#: A typed answer's field may hold at most this many characters.
MAX_ANSWER_CHARS = 5_000
#: A judged prediction, as JSON, at most this many characters.
MAX_PREDICTION_CHARS = 20_000
#: A draft holds at most this many corrections (one per row and author).
MAX_PENDING = 1_000
KINDS = (DatasetChange.ANSWER, DatasetChange.RIGHT, DatasetChange.WRONG)


class CorrectionError(DatasetError):
    """A correction this dataset cannot take; the message is for the person who made it."""


def mark_key(predicted: Any) -> str:
    """Which prediction a mark is about: a digest of its canonical JSON (``DatasetChange``
    keeps one pending mark per row and prediction)."""
    canonical = json.dumps(predicted, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def line_root(dataset: Dataset) -> Dataset:
    return dataset.root or dataset


def latest_of(dataset: Dataset) -> Dataset:
    """The newest version of ``dataset``'s line (what a new run uses unless pinned)."""
    root = line_root(dataset)
    return (
        Dataset.objects.filter(Q(pk=root.pk) | Q(root=root), owner=dataset.owner)
        .order_by("-version", "-pk")
        .first()
        or dataset
    )


def version_in_line(dataset: Dataset, number: int | None) -> Dataset | None:
    """Version ``number`` of ``dataset``'s line (None: its latest); None when there is none."""
    if number is None:
        return latest_of(dataset)
    root = line_root(dataset)
    return (
        Dataset.objects.filter(Q(pk=root.pk) | Q(root=root), owner=dataset.owner, version=number)
        .order_by("-pk")
        .first()
    )


def versions_of(dataset: Dataset) -> list[Dataset]:
    """Every version of ``dataset``'s line (its owner's), oldest first, with change logs."""
    root = line_root(dataset)
    return list(
        Dataset.objects.filter(Q(pk=root.pk) | Q(root=root), owner=dataset.owner)
        .prefetch_related("changes__author")
        .order_by("version", "pk")
    )


def pending(user, dataset: Dataset) -> QuerySet[DatasetChange]:
    """The user's draft corrections on this version, by row."""
    return DatasetChange.objects.filter(base=dataset, author=user, version__isnull=True)


def pending_by_row(user, dataset: Dataset) -> dict[int, DatasetChange]:
    return {change.row_index: change for change in pending(user, dataset)}


def targets_of(dataset: Dataset, data: dict[str, Any]) -> dict[str, Any]:
    return {name: data.get(name) for name in dataset.target_names}


def _row(dataset: Dataset, row_index: int) -> DatasetRow:
    row = DatasetRow.objects.filter(dataset=dataset, index=row_index).first()
    if row is None:
        raise CorrectionError(f"“{dataset.name}” has no row {row_index + 1}.")
    return row


def _answer(dataset: Dataset, answer: dict[str, Any]) -> dict[str, Any]:
    """The typed answer as the dataset stores it: every target field, converted to its type."""
    clean: dict[str, Any] = {}
    for field in dataset.target_fields:
        value = answer.get(field["name"])
        if isinstance(value, str) and len(value) > MAX_ANSWER_CHARS:
            raise CorrectionError(
                f"{field['name']}: at most {MAX_ANSWER_CHARS} characters, got {len(value)}."
            )
        if is_empty(value):
            raise CorrectionError(f"{field['name']}: type the right answer.")
        try:
            clean[field["name"]] = convert(value, field["type"])
        except ConversionError as exc:
            raise CorrectionError(f"{field['name']}: {exc}") from None
    return clean


def _prediction(dataset: Dataset, predicted: Any) -> dict[str, Any]:
    if isinstance(predicted, str):
        if len(predicted) > MAX_PREDICTION_CHARS:
            raise CorrectionError(f"The prediction is longer than {MAX_PREDICTION_CHARS} chars.")
        try:
            predicted = json.loads(predicted)
        except ValueError:
            raise CorrectionError("The prediction is not JSON.") from None
    if not isinstance(predicted, dict):
        raise CorrectionError("Marking needs the prediction that was judged (a JSON object).")
    if len(json.dumps(predicted)) > MAX_PREDICTION_CHARS:
        raise CorrectionError(f"The prediction is longer than {MAX_PREDICTION_CHARS} chars.")
    return predicted


def _source_run(user, dataset: Dataset, run_id: Any) -> int | None:
    if run_id in (None, ""):
        return None
    Run = apps.get_model("training", "Run")  # no import of training: the app registry
    root = line_root(dataset)
    run = Run._default_manager.filter(pk=int(run_id), owner=user).first()
    if run is None or line_root(run.dataset).pk != root.pk:
        raise CorrectionError("That run is not one of yours on this dataset.")
    return run.pk


def record(
    user,
    dataset: Dataset,
    row_index: int,
    kind: str,
    answer: dict[str, Any] | None = None,
    predicted: Any = None,
    run_id: Any = None,
) -> DatasetChange:
    """Add (or replace) the user's draft correction of one row; CorrectionError if unusable.

    ``kind`` is ``answer`` (``answer`` holds the target fields), ``right`` or ``wrong``
    (``predicted`` holds the judged prediction, a dict or its JSON). A row keeps one typed
    answer and one mark per prediction. A typed answer that is already the row's, given with
    the prediction it was typed against, is that prediction's mark (wrong when it differs
    from the answer, right when it equals it): what the person meant, not an error.
    """
    if kind not in KINDS:
        raise CorrectionError(f"Choose one of {', '.join(KINDS)}.")
    row = _row(dataset, int(row_index))
    before = targets_of(dataset, row.data)
    fields: dict[str, Any] = {"split": row.split, "before": before, "after": {}, "predicted": None}
    key = ""
    if kind == DatasetChange.ANSWER:
        fields["after"] = _answer(dataset, answer or {})
        if fields["after"] == before:
            if predicted in (None, ""):
                raise CorrectionError("That is already the row's answer.")
            fields["after"] = {}
            judged = _prediction(dataset, predicted)
            kind = (
                DatasetChange.RIGHT
                if targets_of(dataset, judged) == before
                else DatasetChange.WRONG
            )
    if kind != DatasetChange.ANSWER:
        fields["predicted"] = _prediction(dataset, predicted)
        key = mark_key(fields["predicted"])
    fields["run_id_source"] = _source_run(user, dataset, run_id)
    with transaction.atomic():
        mine = pending(user, dataset).select_for_update()
        existing = mine.filter(row_index=row.index, mark_key=key).first()
        if existing is None and pending(user, dataset).count() >= MAX_PENDING:
            raise CorrectionError(f"A draft holds at most {MAX_PENDING} corrections: publish it.")
        if existing is not None:
            for name, value in {"kind": kind, **fields}.items():
                setattr(existing, name, value)
            existing.save()
            return existing
        return DatasetChange.objects.create(
            base=dataset, author=user, row_index=row.index, kind=kind, mark_key=key, **fields
        )


def judge(
    user,
    dataset: Dataset,
    row_index: int,
    verdict: str,
    predicted: Any,
    answer: dict[str, Any] | None = None,
    run_id: Any = None,
) -> list[DatasetChange]:
    """Mark one prediction right or wrong and, with a wrong mark, optionally say the right
    answer (e.g. the label picked from the label set): a mark, plus a typed answer when the
    one given is not already the row's. Marking wrong while giving the row's own answer is
    just the mark, never refused. Returns the changes recorded."""
    if verdict not in (DatasetChange.RIGHT, DatasetChange.WRONG):
        raise CorrectionError("Mark the prediction right or wrong.")
    given = {name: value for name, value in (answer or {}).items() if not is_empty(value)}
    corrected = None
    if verdict == DatasetChange.WRONG and given:
        corrected = _answer(dataset, given)  # checked before anything is recorded
    with transaction.atomic():
        changes = [record(user, dataset, row_index, verdict, predicted=predicted, run_id=run_id)]
        if corrected is not None and corrected != changes[0].before:
            changes.append(record(user, dataset, row_index, "answer", corrected, run_id=run_id))
    return changes


def discard(user, dataset: Dataset, row_index: int, key: str | None = None) -> None:
    """Drop the user's draft corrections of one row: all of them, or the one ``key`` names
    (``mark_key`` of a prediction, "" for the typed answer); nothing when there is none."""
    mine = pending(user, dataset).filter(row_index=int(row_index))
    if key is not None:
        mine = mine.filter(mark_key=key)
    mine.delete()


def _copy_rows(source: Dataset, target: Dataset) -> None:
    """Every row of ``source`` into ``target`` in one INSERT … SELECT (no rows in Python)."""
    table = DatasetRow._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f'INSERT INTO {table} (dataset_id, "index", split, data) '  # noqa: S608 (our names)
            f'SELECT %s, "index", split, data FROM {table} WHERE dataset_id = %s',
            [target.pk, source.pk],
        )


def _marks(base: Dataset, changes: list[DatasetChange]) -> list[dict[str, Any]]:
    """The base's marks, with this draft's verdicts added (a new verdict on the same row and
    prediction replaces the old one); a typed answer drops the row's earlier marks, which
    were judged against an answer that is no longer the row's. This draft's own marks on a
    row it also answers are judged against that new answer (what the new version holds)."""
    answered = {c.row_index: c.after for c in changes if c.kind == DatasetChange.ANSWER}
    judged = {
        (c.row_index, json.dumps(c.predicted, sort_keys=True))
        for c in changes
        if c.kind != DatasetChange.ANSWER
    }
    marks = [
        mark
        for mark in base.marks or []
        if mark.get("row") not in answered
        and (mark.get("row"), json.dumps(mark.get("predicted"), sort_keys=True)) not in judged
    ]
    judged_rows = [c.row_index for c in changes if c.kind != DatasetChange.ANSWER]
    inputs = {
        row.index: {name: row.data.get(name) for name in base.input_names}
        for row in DatasetRow.objects.filter(dataset=base, index__in=judged_rows)
    }
    for change in changes:
        if change.kind != DatasetChange.ANSWER:
            marks.append(
                {
                    "row": change.row_index,
                    "inputs": inputs.get(change.row_index),
                    "expected": answered.get(change.row_index, change.before),
                    "predicted": change.predicted,
                    "reward": 1.0 if change.kind == DatasetChange.RIGHT else 0.0,
                }
            )
    if len(marks) > MAX_MARKS:
        raise CorrectionError(f"A version holds at most {MAX_MARKS} marks.")
    return marks


def publish(user, base: Dataset) -> Dataset:
    """The user's draft on ``base`` as the next version of the same dataset (same name,
    ``version`` + 1, made from the line's newest version even when the draft was made on
    an older one: DatasetRow.index is the same in every version); CorrectionError when
    there is no draft.

    One transaction: the new version appears with its rows, its marks and its change log,
    or not at all. Earlier versions and the runs that used them are not touched.
    """
    with transaction.atomic():
        changes = list(pending(user, base).select_for_update())
        if not changes:
            raise CorrectionError("There are no corrections to publish.")
        base = latest_of(base)  # corrections seen on an older version go on top of the newest
        root = line_root(base)
        number = (
            Dataset.all_objects.filter(Q(pk=root.pk) | Q(root=root)).aggregate(n=Max("version"))[
                "n"
            ]
            or 1
        ) + 1
        copied = {
            field.name: getattr(base, field.name)
            for field in Dataset._meta.concrete_fields
            if field.name not in ("id", "created", "parent", "root", "version", "marks")
        }
        copied.update(
            name=root.name,  # the same dataset: its version number says which one
            builtin_key="",  # a corrected copy is not the shipped dataset
            parent=base,
            root=root,
            version=number,
            marks=_marks(base, changes),
            importing=False,
        )
        version = Dataset.all_objects.create(**copied)
        _copy_rows(base, version)
        for change in changes:
            if change.kind == DatasetChange.ANSWER:
                row = DatasetRow.objects.get(dataset=version, index=change.row_index)
                row.data = {**row.data, **change.after}
                row.save(update_fields=["data"])
        DatasetChange.objects.filter(pk__in=[c.pk for c in changes]).update(version=version)
    return version


def human_marks(dataset: Dataset) -> list[dict[str, Any]]:
    """The version's marks as the HumanMarks reward takes them (no row numbers): each one
    scoped to its example's inputs."""
    return [
        {
            "inputs": mark.get("inputs"),
            "expected": mark["expected"],
            "predicted": mark["predicted"],
            "reward": mark["reward"],
        }
        for mark in dataset.marks or []
    ]


def shares_file(dataset: Dataset) -> bool:
    """Whether another version still keeps ``dataset``'s original file (do not delete it)."""
    name = dataset.original_file.name
    return bool(name) and (
        Dataset.all_objects.filter(original_file=name).exclude(pk=dataset.pk).exists()
    )
