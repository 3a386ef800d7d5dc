"""A run's trained program as plain prompts, and the check that they score what the run did.

Why: the export (``training.engine.saving.plain_prompts``) is what someone takes elsewhere;
it is worth that only if it answers as the trained program did. The parity check re-scores
the run's test split from the export alone (``plain_prompt_scoring``: no program is loaded
for the predictions) with the run's reward, and puts its mean beside the run's own test
score: "equal", or the difference with what explains it (a retrieval pool or read-out whose
embedding model is missing, a model that sends another output note, failed calls). It calls
the run's model once per test row, so it runs in a worker as a re-score job
(``rescore_jobs.ask_parity``, stored on a ``RescoreJob``); the run's figures never change.

Each function takes a run its caller already checked belongs to the user (``owned_run``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import training.engine as synalinks
from datasets.models import DatasetRow
from datasets.services import get_split
from datasets.versions import human_marks
from training.engine.data_model import create_data_model, data_model_from_schema
from training.engine.saving import deserialize
from training.engine.saving import plain_prompt_scoring as scoring
from training.engine.saving.plain_prompts import PlainPromptError, export_plain_prompts
from training.execution.run_config import build_reward
from training.models import Evaluation, Run
from training.programs.programs import ProgramError, callable_document, program_from_json

#: What a parity job's spec says (a re-score job of another kind than a judge's).
KIND = "plain_prompts"


class ParityError(ValueError):
    """Why this run's program cannot be exported or checked (said on the page)."""


def test_rows(run: Run) -> int:
    return run.dataset.rows.filter(split=DatasetRow.TEST).count()


def offered(run: Run) -> bool:
    """Whether the run page offers the export and its check: a succeeded run with a trained
    program and a test split."""
    return bool(
        run.status == Run.SUCCEEDED and run.trained_program_json is not None and test_rows(run)
    )


def export_of(run: Run) -> dict[str, Any]:
    """The run's trained program as plain prompts (no key: models name their endpoint)."""
    if run.trained_program_json is None:
        raise ParityError("This run has no trained program.")
    try:
        return export_plain_prompts(program_from_json(run.trained_program_json))
    except (ProgramError, PlainPromptError) as exc:
        raise ParityError(str(exc)) from None


def check(run: Run) -> None:
    """ParityError when the check is not offered for this run (a run from code keeps its
    reward in that code: only the name reaches the dashboard)."""
    if not offered(run):
        raise ParityError(
            "The parity check needs a succeeded run with a trained program and a test split."
        )
    if run.source == Run.CODE:
        raise ParityError("A run from code is checked in its code (rescore_plain_prompts).")


def _rows(run: Run, export: dict[str, Any]) -> tuple[list[dict], list[Any]]:
    """The test split's inputs and targets, each target knowing its inputs (as a run's)."""
    inputs, targets = get_split(run.dataset, DatasetRow.TEST)
    input_model = data_model_from_schema(export["inputs"][0]["schema"])
    target_model = create_data_model("Target", run.dataset.target_schema_fields())
    names = list(input_model.model_fields)
    items = [input_model(**{name: row.get(name) for name in names}) for row in inputs]
    truths = [
        synalinks.rewards.attach_inputs(target_model(**row), item)
        for row, item in zip(targets, items, strict=True)
    ]
    return [item.get_json() for item in items], truths


def check_parity(run: Run) -> dict[str, Any]:
    """Re-score the test split from the export alone; the figures and the comparison."""
    check(run)
    export = export_of(run)
    # its models sanitised and, on a saved endpoint, given its key: in memory only
    try:
        connected = callable_document(export, run.owner)
    except ProgramError as exc:
        raise ParityError(str(exc)) from None
    x, y = _rows(run, export)
    program_model = deserialize(connected["modules"][0]["language_model"])
    reward = build_reward(run.config, marks=human_marks(run.dataset), program_model=program_model)
    score = asyncio.run(
        scoring.rescore_plain_prompts(
            connected, x, y, reward, batch_size=int(run.config.get("batch_size") or 32)
        )
    )
    own = run.final_reward
    stored = (
        Evaluation.objects.filter(run=run, phase=Evaluation.AFTER)
        .order_by("index")
        .values_list("example_rewards", flat=True)
        .first()
    )
    differing = None
    if stored and len(stored) == len(score.rewards):
        differing = sum(
            abs(float(a) - float(b)) > 1e-9 for a, b in zip(stored, score.rewards, strict=True)
        )
    compared = scoring.comparison(score, own, len(x))
    return {
        "kind": KIND,
        "export_reward": score.reward,
        "own_reward": own,
        "rows": len(x),
        "equal": compared["equal"],
        "text": compared["text"],
        "rows_differing": differing,
        "failures": score.failures,
        "not_reproduced": score.not_reproduced,
        "drift": score.drift,
        "not_plain": [note for module in export["modules"] for note in module["not_plain"]],
    }


__all__ = ["KIND", "ParityError", "check", "check_parity", "export_of", "offered", "test_rows"]
