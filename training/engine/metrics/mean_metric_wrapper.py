"""``MeanMetricWrapper``: the running mean of a custom ``fn(y_true, y_pred) -> float``."""

from __future__ import annotations

import math
import numbers
from typing import Any

from training.engine.functions import FunctionWrapper, function_name
from training.engine.metrics.metric import Metric
from training.engine.saving import register_synalinks_serializable


@register_synalinks_serializable(package="synalinks")
class MeanMetricWrapper(FunctionWrapper, Metric):
    """Wrap a custom metric function (sync or async); its name is the log key.

    ``fn`` gets the original DataModels (masked field views when a mask is set)
    and must return a finite number; a ``None`` prediction counts as 0.0
    without calling ``fn``. Register ``fn`` with
    ``@synalinks.saving.register_synalinks_serializable()`` so the config can
    name it: code is never saved.
    """

    async def score(self, y_true: Any, y_pred: Any) -> float:
        # Unlike a reward, a metric may be any number (a length, a count), so no range check.
        value = await self._call_fn(y_true, y_pred)
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, numbers.Real) or math.isnan(float(value)):
            raise TypeError(
                f"{self.where} returned {value!r:.80} ({type(value).__name__}); expected a number"
            )
        return float(value)

    def __repr__(self) -> str:
        return f"<MeanMetricWrapper fn={function_name(self.fn)!r} result={self.result():.4f}>"
