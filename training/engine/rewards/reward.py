"""The ``Reward`` base class: the single number training optimises.

A reward compares one ground truth with one prediction and returns a float in
[0, 1]. A failed prediction (``None``) always scores 0.0, so the optimiser never
prefers variables that make the language model fail. Subclasses implement
``call`` on the *masked* fields; the base does masking, the ``None`` rule, batch
handling and range checking so every reward behaves the same.
"""

from __future__ import annotations

import asyncio
import math
import numbers
from typing import Any

import numpy as np

from training.engine.language_models import tracing
from training.engine.masking import MaskedDataModel
from training.engine.scoring import MaskedScorer, default_name, is_batch

__all__ = ["Reward", "check_score", "default_name", "is_batch"]

# Floating point sums (cosine similarity, averages) can land a hair outside [0, 1].
_TOLERANCE = 1e-6


def check_score(value: Any, where: str, *, low: float = 0.0, high: float = 1.0) -> float:
    """Return ``value`` as a float in [low, high] or raise an error naming ``where``.

    ``where`` names the reward or the custom function, so a buggy custom reward
    is easy to find: ``reward 'my_reward' returned 'yes' (str); expected a number``.
    """
    if isinstance(value, bool | np.bool_):
        value = float(value)
    if not isinstance(value, numbers.Real):
        raise TypeError(
            f"{where} returned {value!r:.80} ({type(value).__name__}); "
            f"expected a number between {low} and {high}"
        )
    result = float(value)
    if math.isnan(result):
        raise ValueError(f"{where} returned NaN; expected a number between {low} and {high}")
    if result < low - _TOLERANCE or result > high + _TOLERANCE:
        raise ValueError(f"{where} returned {result}, outside [{low}, {high}]")
    return min(max(result, low), high)


class Reward(MaskedScorer):
    """Base class of rewards.

    Args:
        name: name used in configs (default: snake_case class name, e.g. ``exact_match``).
            Logs always call the optimised quantity ``reward``.
        in_mask: only compare these fields.
        out_mask: compare every field except these.

    Subclasses implement ``async call(y_true, y_pred) -> float`` where both are
    :class:`~training.engine.masking.MaskedDataModel` (``y_true`` may be ``None``
    when there is no ground truth; ``y_pred`` is never ``None``).
    """

    kind = "reward"

    async def __call__(self, y_true: Any, y_pred: Any) -> float:
        """Score one prediction; given sequences of samples, return their mean reward."""
        if is_batch(y_true) or is_batch(y_pred):
            scores = await self.score_batch(y_true, y_pred)
            return float(np.mean(scores)) if scores else 0.0
        if y_pred is None:
            return 0.0
        masked_true, masked_pred = self._prepare(y_true, y_pred)
        value = await self.call(masked_true, masked_pred)
        return check_score(value, self.where)

    async def score_batch(self, y_true: Any, y_pred: Any) -> list[float]:
        """One reward per sample, computed concurrently (overridden to batch API calls)."""
        trues, preds = self._pairs(y_true, y_pred)
        if not tracing.active():
            pairs = zip(trues, preds, strict=True)
            return list(await asyncio.gather(*(self(t, p) for t, p in pairs)))
        return list(
            await asyncio.gather(
                *(self._traced(i, t, p) for i, (t, p) in enumerate(zip(trues, preds, strict=True)))
            )
        )

    async def _traced(self, position: int, y_true: Any, y_pred: Any) -> float:
        """One judgement, its LM calls naming its example (``tracing.batch_examples``)."""
        with tracing.for_batch_item(position):
            return await self(y_true, y_pred)

    async def call(self, y_true: MaskedDataModel | None, y_pred: MaskedDataModel) -> float:
        raise NotImplementedError(
            f"{type(self).__name__} must implement `async call(y_true, y_pred)`"
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r}>"
