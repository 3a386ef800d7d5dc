"""Re-score a finished run's test evaluations on another version of its dataset, from the
predictions already stored, with no program call (issue 30, part of "re-score without
re-running").

When corrections are published (a typed answer changes a row's expected value, a mark says
a prediction was right or wrong), a run's figures can be brought up to date without running
it again: each stored ``EvaluationExample`` prediction is scored by the run's reward against
that version's expected answers, and, for a run that judged by people, by that version's
marks first. Offered for rewards that need no model (``RESCORABLE``: exact match, with or
without people's marks); a judge or embedding reward would call its model, and is said so.
Read-only: nothing is written, the stored figures stay what the run measured.

Each function takes a run its caller already checked belongs to the user (``owned_run``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import training.engine as synalinks
from datasets import versions
from datasets.models import Dataset, DatasetRow
from training.engine.data_model import create_data_model
from training.execution.run_config import build_reward
from training.insight.eval_table import first_evaluations
from training.models import Evaluation, EvaluationExample, Run

#: Rewards scored again without any model call.
RESCORABLE = ("ExactMatch",)
PHASES = (Evaluation.BEFORE, Evaluation.AFTER)


class RescoreError(ValueError):
    """Why this run cannot be re-scored on that version (said on the page)."""


def other_versions(run: Run) -> list[Dataset]:
    """The versions of the run's dataset other than the one it used, oldest first."""
    return [d for d in versions.versions_of(run.dataset) if d.pk != run.dataset_id]


def _targets(dataset: Dataset, row_indices: list[int]) -> dict[int, dict[str, Any]]:
    rows = DatasetRow.objects.filter(dataset=dataset, index__in=row_indices)
    names = dataset.target_names
    return {row.index: {name: row.data.get(name) for name in names} for row in rows}


def rescore(run: Run, version: Dataset) -> dict[str, Any]:
    """The run's stored test predictions scored on ``version``: per phase the stored mean
    and the new one, and the examples whose reward changed. RescoreError if it cannot be."""
    name = (run.config.get("reward") or {}).get("name")
    if name not in RESCORABLE:
        raise RescoreError(
            f"{name} needs its model to score again; re-scoring is offered for "
            f"{', '.join(RESCORABLE)} (with or without people's marks)."
        )
    if run.is_active:
        raise RescoreError("The run is still going: re-score it once it has finished.")
    if versions.line_root(version).pk != versions.line_root(run.dataset).pk:
        raise RescoreError("That is not a version of this run's dataset.")
    evaluations = first_evaluations(run)
    if not evaluations:
        raise RescoreError("This run stored no test predictions to score again.")
    test_rows = list(
        run.dataset.rows.filter(split=DatasetRow.TEST)
        .order_by("index")
        .values_list("index", "data")
    )
    inputs_of = [
        {name: data.get(name) for name in run.dataset.input_names} for _, data in test_rows
    ]
    old_targets = [
        {name: data.get(name) for name in run.dataset.target_names} for _, data in test_rows
    ]
    new_targets = _targets(version, [index for index, _ in test_rows])
    reward = build_reward(run.config, marks=versions.human_marks(version))
    target_model = create_data_model("Target", version.target_schema_fields())
    phases = []
    for phase in PHASES:
        evaluation = evaluations.get(phase)
        if evaluation is None:
            continue
        stored = dict(
            EvaluationExample.objects.filter(evaluation=evaluation).values_list(
                "example_index", "reward"
            )
        )
        predictions = dict(
            EvaluationExample.objects.filter(evaluation=evaluation).values_list(
                "example_index", "prediction"
            )
        )
        positions = [i for i in sorted(predictions) if i < len(test_rows)]
        truths = [
            synalinks.rewards.attach_inputs(
                target_model(**new_targets.get(test_rows[i][0], old_targets[i])), inputs_of[i]
            )
            for i in positions
        ]
        scores = asyncio.run(reward.score_batch(truths, [predictions[i] for i in positions]))
        changed = [
            {
                "index": i,
                "expected_before": old_targets[i],
                "expected_now": new_targets.get(test_rows[i][0], old_targets[i]),
                "prediction": predictions[i],
                "old": stored.get(i),
                "new": score,
            }
            for i, score in zip(positions, scores, strict=True)
            if stored.get(i) is None or abs(score - stored[i]) > 1e-9
        ]
        if not positions:
            continue
        old_mean = sum(stored.get(i) or 0.0 for i in positions) / len(positions)
        new_mean = sum(scores) / len(scores)
        phases.append(
            {
                "phase": phase,
                "old": old_mean,
                "new": new_mean,
                "difference": new_mean - old_mean,
                "changed": changed,
                "examples": len(positions),
            }
        )
    return {"version": version, "phases": phases, "reward_name": name}
