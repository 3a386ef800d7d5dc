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
import re
from typing import Any

import numpy as np

from training.engine.masking import MaskedDataModel, mask_pair, normalize_mask

__all__ = ["Reward", "check_score", "default_name", "is_batch"]

# Floating point sums (cosine similarity, averages) can land a hair outside [0, 1].
_TOLERANCE = 1e-6


def default_name(cls: type) -> str:
    """snake_case of a class name, keeping acronyms together (``LMAsJudge`` → ``lm_as_judge``)."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", cls.__name__)
    return name.lower()


def is_batch(value: Any) -> bool:
    """True for a list/tuple/numpy array of samples (a single DataModel or dict is not)."""
    return isinstance(value, list | tuple | np.ndarray)


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


class Reward:
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

    def __init__(
        self,
        name: str | None = None,
        in_mask: list[str] | None = None,
        out_mask: list[str] | None = None,
    ):
        cls_name = type(self).__name__
        self.name = name or default_name(type(self))
        self.in_mask = normalize_mask(in_mask, argument=f"{cls_name}(in_mask=...)")
        self.out_mask = normalize_mask(out_mask, argument=f"{cls_name}(out_mask=...)")

    @property
    def _where(self) -> str:
        return f"reward {self.name!r} ({type(self).__name__})"

    async def __call__(self, y_true: Any, y_pred: Any) -> float:
        """Score one prediction; given sequences of samples, return their mean reward."""
        if is_batch(y_true) or is_batch(y_pred):
            scores = await self.score_batch(y_true, y_pred)
            return float(np.mean(scores)) if scores else 0.0
        if y_pred is None:
            return 0.0
        masked_true, masked_pred = self._prepare(y_true, y_pred)
        value = await self.call(masked_true, masked_pred)
        return check_score(value, self._where)

    async def score_batch(self, y_true: Any, y_pred: Any) -> list[float]:
        """One reward per sample, computed concurrently (overridden to batch API calls)."""
        trues, preds = self._pairs(y_true, y_pred)
        return list(await asyncio.gather(*(self(t, p) for t, p in zip(trues, preds, strict=True))))

    def _pairs(self, y_true: Any, y_pred: Any) -> tuple[list, list]:
        trues = list(y_true) if is_batch(y_true) else [y_true]
        preds = list(y_pred) if is_batch(y_pred) else [y_pred]
        if y_true is None:
            trues = [None] * len(preds)
        if len(trues) != len(preds):
            raise ValueError(
                f"{self._where}: y_true has {len(trues)} samples but y_pred has {len(preds)}"
            )
        return trues, preds

    def _prepare(
        self, y_true: Any, y_pred: Any
    ) -> tuple[MaskedDataModel | None, MaskedDataModel | None]:
        try:
            return mask_pair(y_true, y_pred, self.in_mask, self.out_mask)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{self._where}: {exc}") from exc

    async def call(self, y_true: MaskedDataModel | None, y_pred: MaskedDataModel) -> float:
        raise NotImplementedError(
            f"{type(self).__name__} must implement `async call(y_true, y_pred)`"
        )

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "in_mask": self.in_mask, "out_mask": self.out_mask}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None) -> Reward:
        return cls(**config)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r}>"
