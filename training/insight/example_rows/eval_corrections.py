"""People's corrections in the run page's per-example table.

The table's rows come from ``eval_table.example_rows`` (which imports this module for the
page's corrections; callers pass the rows in).

Every row of the table (a test example, or a validation example: ``split``) can be corrected
where it is shown: its prediction before training and its prediction after training each
marked right or wrong, or the row given its right answer (on a label field: picked from the
label set). The corrections are
the run owner's draft on the run's dataset version (``datasets.versions``), so the table
reads them next to the rows it shows, and the count of the draft sits above the table.

The prediction a mark is about is read here from what the table shows (the stored
evaluation, or the seed's / best candidate's stored validation prediction; never taken from
the request), and the example's position in its split is mapped to its dataset row
(``DatasetRow.index``, the same in every version: ``split_rows``).

Each function takes a run its caller already checked belongs to the user (``owned_run``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from datasets import versions
from datasets.models import DatasetChange, DatasetRow
from datasets.services import get_split
from training.engine.utils import confusion
from training.insight.example_rows import validation_rows
from training.models import Evaluation, Run

PHASES = (Evaluation.BEFORE, Evaluation.AFTER)

#: What a row's correction form may ask (``action``): a mark per phase, an answer, an undo.
ACTIONS = (
    *(f"{verdict}:{phase}" for verdict in ("right", "wrong") for phase in PHASES),
    "answer",
    *(f"undo:{what}" for what in (*PHASES, "answer")),
)


@dataclass
class RowCorrections:
    """One table row's corrections: a mark per phase that has a prediction, and the typed
    answer, each the pending ``DatasetChange`` or None."""

    row_index: int  # DatasetRow.index of the example
    marks: list[dict[str, Any]] = field(default_factory=list)  # {"phase", "change"}
    answer: DatasetChange | None = None

    @property
    def count(self) -> int:
        return sum(1 for mark in self.marks if mark["change"]) + (1 if self.answer else 0)


def split_rows(run: Run, split: str = "test") -> list[int]:
    """``DatasetRow.index`` of each example of the table's ``split`` in the order the run read
    them: the test split's rows, or the training rows candidates were scored on."""
    if split == "validation":
        return [index for index, _ in validation_rows.scoring_rows(run)]
    rows = run.dataset.rows.filter(split=DatasetRow.TEST).order_by("index")
    return list(rows.values_list("index", flat=True))


def answer_fields(run: Run, rows: list) -> list[dict[str, Any]]:
    """The target fields a row's right answer is given in, each with its labels when it is
    a label field (the dataset's declared label set, else the labels of the test split;
    validation rows: of the test split and them, a few rows alone rarely show the set)."""
    fields = []
    expected = [row.expected for row in rows]
    if any(getattr(row, "split", "test") == "validation" for row in rows):
        expected += get_split(run.dataset, "test")[1]
    for target in run.dataset.target_fields:
        labels = list(target.get("choices") or [])
        if not labels:
            values = [e.get(target["name"]) for e in expected]
            if expected and confusion.is_label(values):
                labels = [str(label) for label in confusion.labels_of(values)]
        fields.append({"name": target["name"], "labels": labels})
    return fields


def for_rows(run: Run, rows: list, row_indices: list[int]) -> dict[int, RowCorrections]:
    """Each shown row's corrections (by example index), from the owner's draft in one read."""
    drafted: dict[tuple[int, str], DatasetChange] = {
        (change.row_index, change.mark_key): change
        for change in versions.pending(run.owner, run.dataset)
    }
    result = {}
    for row in rows:
        if row.index >= len(row_indices):
            continue
        index = row_indices[row.index]
        entry = RowCorrections(row_index=index, answer=drafted.get((index, "")))
        for phase in PHASES:
            prediction = row.prediction(phase)
            if prediction is not None:
                key = versions.mark_key(prediction)
                entry.marks.append({"phase": phase, "change": drafted.get((index, key))})
        result[row.index] = entry
    return result


def pending_summary(run: Run) -> dict[str, Any]:
    """The draft's counts, for the line above the table: marks and answers not published."""
    kinds = list(versions.pending(run.owner, run.dataset).values_list("kind", flat=True))
    answers = kinds.count(DatasetChange.ANSWER)
    return {
        "dataset": run.dataset,
        "pending_count": len(kinds),
        "pending_marks": len(kinds) - answers,
        "pending_answers": answers,
    }


def row_context(
    run: Run, rows: list, example_index: int, split: str = "test"
) -> dict[str, Any] | None:
    """The context of one row's correction cell (None: the run has no such example).
    ``rows``: the table's rows of ``split`` (``eval_table.example_rows``)."""
    if not 0 <= example_index < len(rows):
        return None
    row = rows[example_index]
    indices = split_rows(run, split)
    corrections = for_rows(run, [row], indices).get(example_index)
    if corrections is None:
        return None
    row.corrections = corrections
    return {
        "run": run,
        "row": row,
        "corrections": corrections,
        "answer_fields": answer_fields(run, rows),
    }


def apply(
    run: Run,
    rows: list,
    example_index: int,
    action: str,
    answer: dict[str, Any],
    split: str = "test",
) -> None:
    """Do what the row's form asked (``ACTIONS``) on the run owner's draft, through
    ``datasets.versions`` (the one write of this presenter room); ``rows``: the table's rows
    of ``split``. ``versions.CorrectionError`` when it cannot be done (said on the row)."""
    if action not in ACTIONS:
        raise versions.CorrectionError("Choose right, wrong, an answer or undo.")
    if not 0 <= example_index < len(rows):
        raise versions.CorrectionError("This run has no such example.")
    row = rows[example_index]
    indices = split_rows(run, split)
    dataset_row = indices[example_index]
    verb, _, what = action.partition(":")
    if verb == "undo":
        if what == "answer":
            versions.discard(run.owner, run.dataset, dataset_row, "")
        elif row.prediction(what) is not None:
            key = versions.mark_key(row.prediction(what))
            versions.discard(run.owner, run.dataset, dataset_row, key)
        return
    if verb == "answer":
        predicted = row.after if row.has_after else row.before
        versions.record(
            run.owner, run.dataset, dataset_row, "answer", answer, predicted, run_id=run.pk
        )
        return
    prediction = row.prediction(what)
    if prediction is None:
        raise versions.CorrectionError(f"There is no prediction {what} training to mark.")
    versions.judge(
        run.owner, run.dataset, dataset_row, verb, prediction, answer=answer, run_id=run.pk
    )
