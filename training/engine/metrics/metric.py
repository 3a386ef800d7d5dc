"""The ``Metric`` base class (Keras style): monitored during training, never optimised.

``await metric.update_state(y_true, y_pred)`` accumulates one sample or a batch,
``metric.result()`` gives the running value and ``metric.reset_state()`` starts
over (the trainer resets at each epoch). The base keeps a running *mean* of a
per-sample score, which is what every built-in metric needs; subclasses
implement ``async score(y_true, y_pred) -> float`` on the masked fields.
"""

from __future__ import annotations

import asyncio
from typing import Any

from training.engine.masking import MaskedDataModel
from training.engine.scoring import MaskedScorer, is_batch

__all__ = ["Metric"]


class Metric(MaskedScorer):
    """Base class of metrics: a running mean of per-sample scores.

    Args:
        name: the log key (default: snake_case class name, e.g. ``f1_score``);
            validation values are logged as ``val_<name>``.
        in_mask: only score these fields.
        out_mask: score every field except these.

    A ``None`` prediction scores 0.0.
    """

    kind = "metric"

    def __init__(
        self,
        name: str | None = None,
        in_mask: list[str] | None = None,
        out_mask: list[str] | None = None,
    ):
        super().__init__(name=name, in_mask=in_mask, out_mask=out_mask)
        self.reset_state()

    async def update_state(self, y_true: Any, y_pred: Any) -> None:
        """Add one sample, or a batch (list/tuple/array) of samples, to the running value."""
        if is_batch(y_true) or is_batch(y_pred):
            trues, preds = self._pairs(y_true, y_pred)
            values = await asyncio.gather(
                *(self._score_one(t, p) for t, p in zip(trues, preds, strict=True))
            )
        else:
            values = [await self._score_one(y_true, y_pred)]
        for value in values:
            self.total += value
            self.count += 1

    async def _score_one(self, y_true: Any, y_pred: Any) -> float:
        if y_pred is None:
            return 0.0
        masked_true, masked_pred = self._prepare(y_true, y_pred)
        return float(await self.score(masked_true, masked_pred))

    async def score(self, y_true: MaskedDataModel | None, y_pred: MaskedDataModel) -> float:
        raise NotImplementedError(
            f"{type(self).__name__} must implement `async score(y_true, y_pred)` "
            "or override update_state/result"
        )

    def result(self) -> float:
        """Mean score of the samples seen since the last reset (0.0 before any)."""
        return self.total / self.count if self.count else 0.0

    def reset_state(self) -> None:
        self.total = 0.0
        self.count = 0

    def get_state(self) -> list[float]:
        """The running state as JSON (``[total, count]``): a fit paused mid-epoch keeps it
        (``trainers/pause_point.py``), so the resumed epoch reports what it would have.
        A metric that keeps other state overrides both."""
        return [float(self.total), float(self.count)]

    def set_state(self, state: list[float]) -> None:
        """Take back what ``get_state`` gave."""
        total, count = state
        self.total, self.count = float(total), int(count)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r} result={self.result():.4f}>"
