"""Which of a run's test predictions people judged: a run launched with "judge by
people" scored a prediction by a person's mark when its dataset version held one for that
example and prediction (``engine.rewards.HumanMarks``), by its own reward otherwise.

The run's dataset version is fixed, so its marks are the ones the run used; each stored
prediction is looked up the way the reward looked it up (the same masks, the example's
inputs attached to its expected answer, ``HumanMarks.lookup``), with no LM call and nothing
written. The per-example table shows each judged prediction's verdict, counts the examples
and lists them (``?judged=1``).
"""

from __future__ import annotations

from typing import Any

import training.engine as synalinks
from datasets.versions import human_marks  # the marks exactly as the worker passed them
from training.engine.data_model import create_data_model
from training.models import Evaluation, Run

PHASES = (Evaluation.BEFORE, Evaluation.AFTER)


def judges_by_people(run: Run) -> bool:
    return bool((run.config.get("reward") or {}).get("judge_by_people"))


def _reward(run: Run) -> Any:
    """The marks as the run's reward held them (its masks; the fallback is never called)."""
    spec = run.config.get("reward") or {}
    return synalinks.rewards.HumanMarks(
        marks=human_marks(run.dataset),
        in_mask=spec.get("in_mask"),
        out_mask=spec.get("out_mask"),
    )


def mark_rows(run: Run, rows: list) -> None:
    """Set ``row.judged`` ({phase: the person's reward}) on each table row a person judged
    (``eval_table.ExampleRow``); nothing for a run that did not judge by people."""
    if not rows or not judges_by_people(run) or not run.dataset.marks:
        return
    reward = _reward(run)
    target = create_data_model("Target", run.dataset.target_schema_fields())
    for row in rows:
        try:
            truth = synalinks.rewards.attach_inputs(target(**row.expected), row.inputs)
        except ValueError:  # a target the model refuses cannot have been marked either
            continue
        for phase in PHASES:
            prediction = row.prediction(phase)
            if prediction is None:
                continue
            verdict = reward.lookup(truth, prediction)
            if verdict is not None:
                row.judged[phase] = verdict


def summary(run: Run, rows: list) -> dict[str, Any]:
    """How many examples (and predictions) people judged, for the line above the table."""
    judged = [row for row in rows if row.judged]
    return {
        "judge_by_people": judges_by_people(run),
        "judged_examples": len(judged),
        "judged_predictions": sum(len(row.judged) for row in judged),
        "judged_marks": len(run.dataset.marks or []),
    }
