"""ChainOfThought: a Generator whose output starts with a ``thinking`` field."""

from __future__ import annotations

from pydantic import Field

from training.engine.data_model import DataModel, extend_data_model
from training.engine.modules.generator import Generator
from training.engine.saving import register_synalinks_serializable

THINKING_DESCRIPTION = "Your step by step reasoning before giving the final answer"


@register_synalinks_serializable(package="synalinks")
class ChainOfThought(Generator):
    """Like Generator, but the LM first writes its reasoning in ``thinking``."""

    def compute_output_data_model(self, input_data_models: list) -> type[DataModel]:
        cached = getattr(self, "_cot_model", None)
        if cached is None:
            if "thinking" in self.data_model.model_fields:
                cached = self.data_model
            else:
                cached = extend_data_model(
                    self.data_model.__name__,
                    self.data_model,
                    {"thinking": (str, Field(..., description=THINKING_DESCRIPTION))},
                )
            self._cot_model = cached
        return cached
