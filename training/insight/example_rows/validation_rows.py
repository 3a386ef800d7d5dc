"""The validation examples of a run, with what the program predicted on them before and
after training.

No pass over the validation split is made for this: the optimizer already scored every
candidate on it, and each scored candidate keeps its predictions and rewards
(``Candidate.example_predictions``, the first ``MAX_EXAMPLE_PREDICTIONS`` of the scoring set,
``training/execution/recording/candidate_predictions.py``). So:

- the rows are the training rows ``fit`` set apart for scoring, found again by the engine's
  ``data_adapter.scoring_positions`` (the same cut ``fit`` made: the validation split, after
  the selection split; the training rows themselves without a validation split);
- "before" is the seed candidate's scoring (the program as it started), "after" the best
  candidate's (the one the run ended with, status ``best``): the same two moments as the
  test table's evaluations before and after training.

A row is shown for each position one of the two stored a prediction for.

Each function takes a run its caller already checked belongs to the user (``owned_run``).
"""

from __future__ import annotations

from typing import Any

from datasets.services import training_rows
from training.engine.trainers.data_adapter import scoring_positions
from training.execution import run_config
from training.models import Candidate, Run


def scoring_rows(run: Run) -> list[tuple[int, dict]]:
    """``(DatasetRow.index, data)`` of each row the run's optimizer scored candidates on, in
    the scoring set's order (a stored prediction's position is its place here)."""
    train = training_rows(run.dataset, run_config.spreads_by_label(run.config))
    config = run.config
    positions = scoring_positions(
        len(train),
        float(config.get("validation_split") or 0.0),
        float(config["selection_split"]),
    )
    return [train[p] for p in positions]


def seed_and_best(run: Run) -> tuple[Candidate | None, Candidate | None]:
    """The seed's stored scoring and the best candidate's (None where there is none yet, or
    it kept no predictions; the best when the variables' best candidates are one scoring)."""
    kept = run.candidates.filter(example_predictions__isnull=False).defer(None).order_by("id")
    seed = kept.filter(operation="seed").first()
    best = list(kept.filter(status="best"))
    if (
        len({c.candidate_id for c in best}) != 1
        or len(best) != run.candidates.filter(status="best").count()
    ):
        return seed, None
    return seed, best[0]


def phase_values(candidate: Candidate | None) -> dict[int, tuple[Any, str, float | None]]:
    """{position: (prediction, error, reward)} of a candidate's stored scoring."""
    if candidate is None:
        return {}
    predictions = list(candidate.example_predictions or [])
    rewards = list(candidate.example_rewards or [])
    # A failed prediction is kept as None; its error text is not kept with a candidate.
    return {
        i: (prediction, "", rewards[i] if i < len(rewards) else None)
        for i, prediction in enumerate(predictions)
    }
