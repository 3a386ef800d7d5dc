"""``MeanRewardWrapper``: turn an async ``fn(y_true, y_pred) -> float`` into a Reward."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from training.engine.rewards.functions import (
    call_function,
    check_callable,
    function_name,
    registered_function_name,
    resolve_function,
)
from training.engine.rewards.reward import Reward, check_score
from training.engine.saving import register_synalinks_serializable


@register_synalinks_serializable(package="synalinks")
class MeanRewardWrapper(Reward):
    """Wrap a custom reward function; the batch reward is the mean of per-sample values.

    ``fn`` receives the ground truth and the prediction (the original DataModels
    when no mask is set, masked field views with the same ``.get`` API
    otherwise) and must return a number in [0, 1]; anything else raises an
    error naming the function. A ``None`` prediction scores 0.0 without calling
    ``fn``. Register ``fn`` with ``@synalinks.saving.register_synalinks_serializable()``
    so the program can be saved: the config stores its registered name only.
    """

    def __init__(
        self,
        fn: Callable,
        name: str | None = None,
        in_mask: list[str] | None = None,
        out_mask: list[str] | None = None,
    ):
        self.fn = check_callable(fn, "MeanRewardWrapper")
        super().__init__(name=name or function_name(fn), in_mask=in_mask, out_mask=out_mask)

    @property
    def _where(self) -> str:
        return f"custom reward function {function_name(self.fn)!r}"

    def _prepare(self, y_true: Any, y_pred: Any) -> tuple[Any, Any]:
        if self.in_mask is None and not self.out_mask:
            return y_true, y_pred
        return super()._prepare(y_true, y_pred)

    async def call(self, y_true: Any, y_pred: Any) -> float:
        value = await call_function(self.fn, y_true, y_pred)
        return check_score(value, self._where)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["fn"] = registered_function_name(self.fn, "MeanRewardWrapper")
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None):
        config = dict(config)
        fn = resolve_function(config.pop("fn", None), "MeanRewardWrapper", custom_objects)
        return cls(fn=fn, **config)

    def __repr__(self) -> str:
        return f"<MeanRewardWrapper fn={function_name(self.fn)!r}>"
