"""``MeanRewardWrapper``: turn an async ``fn(y_true, y_pred) -> float`` into a Reward."""

from __future__ import annotations

from typing import Any

from training.engine.functions import FunctionWrapper, function_name
from training.engine.rewards.reward import Reward, check_score
from training.engine.saving import register_synalinks_serializable


@register_synalinks_serializable(package="synalinks")
class MeanRewardWrapper(FunctionWrapper, Reward):
    """Wrap a custom reward function; the batch reward is the mean of per-sample values.

    ``fn`` receives the ground truth and the prediction (the original DataModels
    when no mask is set, masked field views with the same ``.get`` API
    otherwise) and must return a number in [0, 1]; anything else raises an
    error naming the function. A ``None`` prediction scores 0.0 without calling
    ``fn``. Register ``fn`` with ``@synalinks.saving.register_synalinks_serializable()``
    so the program can be saved: the config stores its registered name only.
    """

    async def call(self, y_true: Any, y_pred: Any) -> float:
        return check_score(await self._call_fn(y_true, y_pred), self.where)

    def __repr__(self) -> str:
        return f"<MeanRewardWrapper fn={function_name(self.fn)!r}>"
