"""``MeanMetricWrapper``: the running mean of a custom ``fn(y_true, y_pred) -> float``."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

from training.engine.metrics.metric import Metric
from training.engine.rewards.functions import (
    call_function,
    check_callable,
    function_name,
    registered_function_name,
    resolve_function,
)
from training.engine.saving import register_synalinks_serializable


@register_synalinks_serializable(package="synalinks")
class MeanMetricWrapper(Metric):
    """Wrap a custom metric function (sync or async); its name is the log key.

    ``fn`` gets the original DataModels (masked field views when a mask is set)
    and must return a finite number; a ``None`` prediction counts as 0.0
    without calling ``fn``. Register ``fn`` with
    ``@synalinks.saving.register_synalinks_serializable()`` so the config can
    name it: code is never saved.
    """

    def __init__(
        self,
        fn: Callable,
        name: str | None = None,
        in_mask: list[str] | None = None,
        out_mask: list[str] | None = None,
    ):
        self.fn = check_callable(fn, "MeanMetricWrapper")
        super().__init__(name=name or function_name(fn), in_mask=in_mask, out_mask=out_mask)

    @property
    def _where(self) -> str:
        return f"custom metric function {function_name(self.fn)!r}"

    def _prepare(self, y_true: Any, y_pred: Any) -> tuple[Any, Any]:
        if self.in_mask is None and not self.out_mask:
            return y_true, y_pred
        return super()._prepare(y_true, y_pred)

    async def score(self, y_true: Any, y_pred: Any) -> float:
        value = await call_function(self.fn, y_true, y_pred)
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, numbers.Real) or math.isnan(float(value)):
            raise TypeError(
                f"{self._where} returned {value!r:.80} ({type(value).__name__}); expected a number"
            )
        return float(value)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["fn"] = registered_function_name(self.fn, "MeanMetricWrapper")
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None):
        config = dict(config)
        fn = resolve_function(config.pop("fn", None), "MeanMetricWrapper", custom_objects)
        return cls(fn=fn, **config)

    def __repr__(self) -> str:
        return f"<MeanMetricWrapper fn={function_name(self.fn)!r} result={self.result():.4f}>"
