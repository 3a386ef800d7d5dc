"""Storing each test example's prediction of an evaluation (the per-example table's rows).

``store(evaluation, rewards, predictions, errors)`` replaces the evaluation's
:class:`~training.models.EvaluationExample` rows in one ``bulk_create``. Everything stored is
bounded: each text of a prediction is cut to :data:`MAX_CHARS` characters, each list to
:data:`MAX_ITEMS` items, the nesting to :data:`MAX_DEPTH`, an error to the column's 500.
"""

from __future__ import annotations

from typing import Any

from training.models import Evaluation, EvaluationExample

#: Characters kept of each text in a stored prediction (the rest is said, not kept).
MAX_CHARS = 2000
#: Items kept of each list in a stored prediction.
MAX_ITEMS = 50
#: Nesting kept in a stored prediction (deeper values become their text, cut).
MAX_DEPTH = 6
ERROR_CHARS = 500


def bounded(value: Any, depth: int = 0) -> Any:
    """``value`` (an output's JSON) with every text, list and nesting level bounded."""
    if isinstance(value, str):
        if len(value) > MAX_CHARS:
            return f"{value[:MAX_CHARS]}… [{len(value) - MAX_CHARS} more characters]"
        return value
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth >= MAX_DEPTH:
        return bounded(str(value)[: MAX_CHARS + 1], depth)
    if isinstance(value, dict):
        return {str(key)[:200]: bounded(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        kept = [bounded(item, depth + 1) for item in list(value)[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            kept.append(f"… [{len(value) - MAX_ITEMS} more items]")
        return kept
    return bounded(str(value), depth)


def store(
    evaluation: Evaluation,
    rewards: list[float],
    predictions: list[dict | None],
    errors: list[str | None],
) -> int:
    """Replace the evaluation's example rows; returns how many were stored.

    ``predictions``/``errors`` come from ``callbacks.ExampleRewards(predictions=True)`` (one
    each per example, in the test split's order); an evaluation stored without them (a
    script's, an old run's) keeps no rows and the table says so."""
    EvaluationExample.objects.filter(evaluation=evaluation).delete()
    if not predictions:
        return 0
    rows = [
        EvaluationExample(
            evaluation=evaluation,
            example_index=index,
            prediction=bounded(prediction) if prediction is not None else None,
            error=(str(error or "") if prediction is None else "")[:ERROR_CHARS]
            or ("the prediction failed" if prediction is None else ""),
            reward=float(rewards[index]) if index < len(rewards) else 0.0,
        )
        for index, (prediction, error) in enumerate(zip(predictions, errors, strict=False))
    ]
    EvaluationExample.objects.bulk_create(rows, batch_size=500)
    return len(rows)
