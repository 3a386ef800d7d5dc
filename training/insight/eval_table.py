"""Reads behind the run page's per-example evaluation table and its confusion matrices.

The table shows one split at a time (``?split=``, :data:`SPLITS`): ``test`` (the default) or
``validation``. Each test example is one row: its inputs and expected output (the dataset's
test row), the prediction and reward of the first evaluation before training and of the
first after. Each validation example (the rows the optimizer scored candidates on) is one
row too, its predictions the seed's and the best candidate's stored scorings
(``validation_rows``): no evaluation is run for them. Each row has a
state (:data:`STATES`): ``failed`` when the prediction after training failed, else
``improved`` / ``regressed`` / ``same`` by comparing the two rewards (before the "after"
evaluation exists, a row has no state unless its prediction failed).

The whole table is assembled in Python from three reads (the test split's rows, and each
phase's :class:`~training.models.EvaluationExample` rows) and then filtered, sorted and
paginated: a 1,000-example split is a few thousand small rows (``bench/eval_table_speed.py``
times a page). A target field is a label when ``engine.utils.confusion.is_label`` says so;
its matrices count the same rows, and a cell's filter uses the matrix's own ``column_of``.

Each function takes a run its caller already checked belongs to the user (``owned_run``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator

from datasets.services import get_split
from training.engine.trainers.candidate_scores import MAX_EXAMPLE_PREDICTIONS
from training.engine.utils import confusion
from training.insight.example_rows import eval_corrections, human_judgements, validation_rows
from training.models import Evaluation, EvaluationExample, Run
from training.query_filters import one_of

ROWS_PER_PAGE = 25
STATES = ("improved", "regressed", "same", "failed")
PHASES = (Evaluation.BEFORE, Evaluation.AFTER)
#: ``?split=`` values: the test split's evaluations, or the validation rows candidates were
#: scored on (the seed's and the best candidate's stored predictions).
TEST, VALIDATION = "test", "validation"
SPLITS = (TEST, VALIDATION)
#: ``?sort=`` values (a leading ``-`` sorts descending).
SORTS = {
    "index": "example",
    "before": "reward before",
    "after": "reward after",
    "change": "change",
    "state": "state",
}
#: ``?sort=-state`` (the header's first click) lists regressions first, then failures.
_STATE_ORDER = {state: i for i, state in enumerate(("same", "improved", "failed", "regressed"))}
MAX_QUERY = 200


@dataclass
class TableFilters:
    """What the table shows, read from its query string (``?state=regressed&q=refund``).

    A value that cannot be used is left out and said in ``problems``.
    """

    state: str = ""
    q: str = ""
    sort: str = "index"
    target: str = ""  # a confusion-matrix cell: target field, expected row, predicted column
    expected: str = ""
    predicted: str = ""
    matrix: str = ""  # which phase's matrix the cell is in
    judged: bool = False  # only the examples people judged (a "judge by people" run)
    split: str = TEST
    problems: list[str] = field(default_factory=list)

    @classmethod
    def from_query(cls, query: Any) -> TableFilters:
        filters = cls()
        problems = filters.problems
        filters.split = one_of(query, "split", SPLITS, problems, default=TEST)
        filters.state = one_of(query, "state", STATES, problems)
        filters.q = query.get("q", "").strip()[:MAX_QUERY]
        filters.sort = one_of(
            query, "sort", SORTS, problems, default="index", normalize=lambda s: s.lstrip("-")
        )
        filters.judged = query.get("judged", "") == "1"
        filters.matrix = one_of(query, "matrix", PHASES, problems)
        if filters.matrix:
            filters.target = query.get("field", "")[:200]
            filters.expected = query.get("expected", "")[:2000]
            filters.predicted = query.get("predicted", "")[:2000]
        return filters

    def as_query(self, **changes: Any) -> str:
        """The query string of these filters with ``changes`` (None or "" removes one)."""
        values = {
            "state": self.state,
            "q": self.q,
            "sort": "" if self.sort == "index" else self.sort,
            "matrix": self.matrix,
            "field": self.target if self.matrix else "",
            "expected": self.expected if self.matrix else "",
            "predicted": self.predicted if self.matrix else "",
            "judged": "1" if self.judged else "",
            "split": "" if self.split == TEST else self.split,
        }
        values.update({key: "" if value is None else str(value) for key, value in changes.items()})
        return urlencode({key: value for key, value in values.items() if value})

    def sort_query(self, key: str) -> str:
        """The query sorting by ``key``: descending first, ascending when already so."""
        return self.as_query(sort=key if self.sort == f"-{key}" else f"-{key}", page=None)

    @property
    def cell(self) -> bool:
        return bool(self.matrix)

    @property
    def active(self) -> bool:
        return bool(self.state or self.q or self.matrix or self.judged)


@dataclass
class ExampleRow:
    """One test example with its predictions before and after training."""

    index: int
    inputs: dict
    expected: dict
    before: dict | None = None
    after: dict | None = None
    before_reward: float | None = None
    after_reward: float | None = None
    before_error: str = ""
    after_error: str = ""
    has_before: bool = False
    has_after: bool = False
    # People's draft corrections of this row (eval_corrections.RowCorrections), on a page.
    corrections: Any = None
    # {phase: reward} of the predictions people's marks scored (human_judgements).
    judged: dict = field(default_factory=dict)
    split: str = TEST  # which split's example (its correction cell and calls say so)

    @property
    def change(self) -> float | None:
        if self.before_reward is None or self.after_reward is None:
            return None
        return self.after_reward - self.before_reward

    @property
    def state(self) -> str:
        if self.has_after:
            if self.after is None:
                return "failed"
            change = self.change
            if change is None:
                return ""
            if change > 1e-9:
                return "improved"
            if change < -1e-9:
                return "regressed"
            return "same"
        if self.has_before and self.before is None:
            return "failed"
        return ""

    @property
    def inputs_text(self) -> str:
        return shown(self.inputs)

    @property
    def expected_text(self) -> str:
        return shown(self.expected)

    @property
    def before_text(self) -> str:
        return shown(self.before)

    @property
    def after_text(self) -> str:
        return shown(self.after)

    def prediction(self, phase: str) -> dict | None:
        return self.before if phase == Evaluation.BEFORE else self.after

    def text(self) -> str:
        """Everything the search looks in, lower-cased."""
        return (
            " ".join(
                _json(value).lower()
                for value in (self.inputs, self.expected, self.before, self.after)
                if value is not None
            )
            + f" {self.before_error} {self.after_error}".lower()
        )


def shown(value: Any) -> str:
    """A JSON object as the table shows it: a one-field object as its value, else JSON."""
    if value is None:
        return ""
    if isinstance(value, dict) and len(value) == 1:
        (only,) = value.values()
        return only if isinstance(only, str) else _json(only)
    return _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


def first_evaluations(run: Run) -> dict[str, Evaluation]:
    """The first stored evaluation of each phase (the one the table shows)."""
    chosen: dict[str, Evaluation] = {}
    for evaluation in run.evaluations.only("id", "phase", "index").order_by("phase", "index"):
        chosen.setdefault(evaluation.phase, evaluation)
    return chosen


def example_rows(run: Run, split: str = TEST) -> tuple[list[ExampleRow], dict[str, Any]]:
    """Every example of ``split`` as a row, and what the phases come from: the test split's
    evaluations, or (``validation``) the seed's and the best candidate's stored scorings."""
    if split == VALIDATION:
        return _validation_rows(run)
    evaluations = first_evaluations(run)
    stored = (
        EvaluationExample.objects.filter(evaluation__in=list(evaluations.values()))
        .order_by()
        .values_list("evaluation_id", "example_index", "prediction", "error", "reward")
    )
    phase_of = {evaluation.pk: phase for phase, evaluation in evaluations.items()}
    by_phase: dict[str, dict[int, tuple]] = {phase: {} for phase in PHASES}
    for evaluation_id, index, prediction, error, reward in stored.iterator(chunk_size=2000):
        by_phase[phase_of[evaluation_id]][index] = (prediction, error, reward)
    if not by_phase[Evaluation.BEFORE] and not by_phase[Evaluation.AFTER]:
        return [], evaluations
    inputs, targets = get_split(run.dataset, "test")
    rows = []
    for index, (item, target) in enumerate(zip(inputs, targets, strict=True)):
        row = ExampleRow(index=index, inputs=item, expected=target)
        before = by_phase[Evaluation.BEFORE].get(index)
        if before is not None:
            row.has_before = True
            row.before, row.before_error, row.before_reward = before
        after = by_phase[Evaluation.AFTER].get(index)
        if after is not None:
            row.has_after = True
            row.after, row.after_error, row.after_reward = after
        rows.append(row)
    return rows, evaluations


def _validation_rows(run: Run) -> tuple[list[ExampleRow], dict[str, Any]]:
    seed, best = validation_rows.seed_and_best(run)
    by_phase = {
        Evaluation.BEFORE: validation_rows.phase_values(seed),
        Evaluation.AFTER: validation_rows.phase_values(best),
    }
    sources = {phase: c for phase, c in zip(PHASES, (seed, best), strict=True) if c is not None}
    count = max((len(values) for values in by_phase.values()), default=0)
    if not count:
        return [], sources
    names = run.dataset
    rows = []
    for index, (_, data) in enumerate(validation_rows.scoring_rows(run)[:count]):
        row = ExampleRow(
            index=index,
            inputs={n: data.get(n) for n in names.input_names},
            expected={n: data.get(n) for n in names.target_names},
            split=VALIDATION,
        )
        for phase in PHASES:
            values = by_phase[phase].get(index)
            if values is None:
                continue
            if phase == Evaluation.BEFORE:
                row.has_before = True
                row.before, row.before_error, row.before_reward = values
            else:
                row.has_after = True
                row.after, row.after_error, row.after_reward = values
        rows.append(row)
    return rows, sources


def label_fields(run: Run, rows: list[ExampleRow]) -> list[str]:
    """The target fields that are labels on this test split."""
    names = run.dataset.target_names if rows else []
    return [name for name in names if confusion.is_label([row.expected.get(name) for row in rows])]


def matrices(run: Run, rows: list[ExampleRow], split: str = TEST) -> list[dict[str, Any]]:
    """One entry per label field: its matrix before and after (each None when that phase
    has no stored predictions), laid out for the template with each cell's filter query."""
    result = []
    for name in label_fields(run, rows):
        labels = confusion.labels_of([row.expected.get(name) for row in rows])
        entry: dict[str, Any] = {"field": name, "phases": []}
        for phase in PHASES:
            have = [row for row in rows if (row.has_before if phase == "before" else row.has_after)]
            if not have:
                continue
            predicted = [
                None if row.prediction(phase) is None else row.prediction(phase).get(name)
                for row in have
            ]
            matrix = confusion.confusion_matrix(
                [row.expected.get(name) for row in have],
                predicted,
                labels=labels,
            )
            entry["phases"].append(
                {"phase": phase, "matrix": matrix, "rows": _cells(matrix, name, phase, split)}
            )
        result.append(entry)
    return result


def _cells(
    matrix: confusion.ConfusionMatrix, name: str, phase: str, split: str = TEST
) -> list[dict[str, Any]]:
    laid_out = []
    for i, label in enumerate(matrix.labels):
        cells = []
        for j, column in enumerate(matrix.columns):
            query = urlencode(
                {
                    **({"split": split} if split != TEST else {}),
                    "matrix": phase,
                    "field": name,
                    "expected": label,
                    "predicted": column,
                }
            )
            cells.append(
                {"count": matrix.counts[i][j], "column": column, "diagonal": i == j, "query": query}
            )
        laid_out.append({"label": label, "cells": cells, "scores": matrix.classes[i]})
    return laid_out


def apply(rows: list[ExampleRow], filters: TableFilters, tables: list[dict]) -> list[ExampleRow]:
    """The rows ``filters`` keep, in its order."""
    if filters.state:
        rows = [row for row in rows if row.state == filters.state]
    if filters.judged:
        rows = [row for row in rows if row.judged]
    if filters.matrix:
        matrix = next(
            (
                phase["matrix"]
                for entry in tables
                if entry["field"] == filters.target
                for phase in entry["phases"]
                if phase["phase"] == filters.matrix
            ),
            None,
        )
        if matrix is None:
            filters.problems.append(f"no confusion matrix for {filters.target[:50]!r}")
        else:
            name = filters.target
            rows = [
                row
                for row in rows
                if (row.has_before if filters.matrix == "before" else row.has_after)
                and matrix.row_of(row.expected.get(name)) == filters.expected
                and matrix.column_of(_field_of(row.prediction(filters.matrix), name))
                == filters.predicted
            ]
    if filters.q:
        needle = filters.q.lower()
        rows = [row for row in rows if needle in row.text()]
    return _sorted(rows, filters.sort)


def _field_of(prediction: dict | None, name: str) -> Any:
    return None if prediction is None else prediction.get(name)


def _sorted(rows: list[ExampleRow], sort: str) -> list[ExampleRow]:
    key_name = sort.lstrip("-")
    descending = sort.startswith("-")
    missing = float("-inf") if descending else float("inf")

    def key(row: ExampleRow):
        if key_name == "before":
            value = row.before_reward
        elif key_name == "after":
            value = row.after_reward
        elif key_name == "change":
            value = row.change
        elif key_name == "state":
            value = _STATE_ORDER.get(row.state, -1)
        else:
            value = row.index
        value = missing if value is None else value
        return (-value if descending else value, row.index)

    return sorted(rows, key=key)


def table(run: Run, filters: TableFilters, page: Any) -> dict[str, Any]:
    """The run page's table context: one page of filtered rows, counts per state, matrices."""
    rows, evaluations = example_rows(run, filters.split)
    human_judgements.mark_rows(run, rows)
    tables = matrices(run, rows, filters.split)
    counts = {state: 0 for state in STATES}
    for row in rows:
        if row.state in counts:
            counts[row.state] += 1
    kept = apply(rows, filters, tables)
    result_page: Page = Paginator(kept, ROWS_PER_PAGE).get_page(page)
    corrections = (
        eval_corrections.for_rows(
            run, result_page.object_list, eval_corrections.split_rows(run, filters.split)
        )
        if rows
        else {}
    )
    for row in result_page.object_list:
        row.corrections = corrections.get(row.index)
    return {
        "answer_fields": eval_corrections.answer_fields(run, rows),
        **human_judgements.summary(run, rows),
        **eval_corrections.pending_summary(run),
        "table_page": result_page,
        "table_filters": filters,
        "table_query": filters.as_query(),
        "table_sorts": {key: filters.sort_query(key) for key in SORTS},
        "table_total": len(rows),
        "table_matching": len(kept),
        "table_counts": [(state, counts[state]) for state in STATES],
        "table_states": STATES,
        "table_has_after": Evaluation.AFTER in evaluations,
        "table_evaluations": evaluations,
        "table_split": filters.split,
        "validation_kept": MAX_EXAMPLE_PREDICTIONS,  # what each candidate keeps of its scoring
        "table_splits": SPLITS,
        # what each state link and the filter form keep of the split (none for test)
        "table_split_query": "" if filters.split == TEST else urlencode({"split": filters.split}),
        "confusion_tables": tables,
    }


def table_context(run: Run, query: Any) -> dict[str, Any]:
    """The table's context from a query string (the run page's own, or an htmx request's)."""
    return table(run, TableFilters.from_query(query), query.get("page"))


def csv_rows(run: Run, filters: TableFilters):
    """The header, then every row ``filters`` keep (all pages), as lists of cells (texts as
    the table shows them: a one-field object as its value, else its JSON); a run that judged
    by people adds ``judged_by_people`` (``before:1 after:0``: the people's rewards)."""
    rows, _ = example_rows(run, filters.split)
    human_judgements.mark_rows(run, rows)
    judged = human_judgements.judges_by_people(run)  # a column of its own only then
    kept = apply(rows, filters, matrices(run, rows, filters.split))
    yield [
        "example",
        "inputs",
        "expected",
        "prediction_before",
        "reward_before",
        "error_before",
        "prediction_after",
        "reward_after",
        "error_after",
        "state",
        *(["judged_by_people"] if judged else []),
    ]
    for row in kept:
        yield [
            row.index,
            row.inputs_text,
            row.expected_text,
            row.before_text,
            "" if row.before_reward is None else row.before_reward,
            row.before_error,
            row.after_text,
            "" if row.after_reward is None else row.after_reward,
            row.after_error,
            row.state,
            *([" ".join(f"{p}:{reward:g}" for p, reward in row.judged.items())] if judged else []),
        ]
