"""Keeping each scored candidate's per-example predictions, bounded per run.

Why: a finished run's candidates can only be re-scored without calling the program again
(corrections published as a new dataset version, another reward) if what each candidate
predicted is kept. The engine sends at most ``MAX_EXAMPLE_PREDICTIONS`` (100, the first
examples of the scoring set) in each ``candidate`` event; here each text, list and nesting
level is bounded as the test predictions are (``evaluation_examples.bounded``) and at most
:data:`MAX_CANDIDATES_WITH_PREDICTIONS` candidates of one run keep them (the first scored:
the seed and the early population that the ranks compare). A candidate past the bound keeps
its rewards, not its predictions, and a re-score says how many it could not score again.
"""

from __future__ import annotations

from typing import Any

from training.engine.trainers.candidate_scores import MAX_EXAMPLE_PREDICTIONS
from training.execution.recording.evaluation_examples import bounded
from training.models import Candidate

#: The most candidates of one run that keep their predictions (the rest keep their rewards).
MAX_CANDIDATES_WITH_PREDICTIONS = 200


def from_event(event: dict[str, Any]) -> list[dict | None] | None:
    """The event's predictions, bounded, or None when it has none (or malformed ones)."""
    predictions = event.get("example_predictions")
    if not isinstance(predictions, list) or not predictions:
        return None
    if not all(p is None or isinstance(p, dict) for p in predictions):
        return None
    return [None if p is None else bounded(p) for p in predictions[:MAX_EXAMPLE_PREDICTIONS]]


def room_for(run_id: int, candidate_id: str) -> bool:
    """Whether this candidate may keep predictions: it already does, or the run keeps fewer
    than the bound (counted per candidate id: a joint candidate of several variables is one
    scoring)."""
    kept = Candidate.objects.filter(run_id=run_id, example_predictions__isnull=False)
    if kept.filter(candidate_id=candidate_id).exists():
        return True
    return kept.values("candidate_id").distinct().count() < MAX_CANDIDATES_WITH_PREDICTIONS
