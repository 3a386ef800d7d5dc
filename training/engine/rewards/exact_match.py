"""``ExactMatch``: 1.0 when the (masked) prediction equals the ground truth, else 0.0."""

from __future__ import annotations

from training.engine.masking import MaskedDataModel
from training.engine.rewards.reward import Reward
from training.engine.saving import register_synalinks_serializable


@register_synalinks_serializable(package="synalinks")
class ExactMatch(Reward):
    """String/value equality of the compared fields.

    Values are compared as JSON values (``18 == 18.0``; strings exactly, case
    and whitespace included). Use ``in_mask=["answer"]`` to compare only the
    answer, or ``out_mask=["thinking"]`` to ignore the reasoning.

    Args:
        in_mask: the only fields compared (None: every field of the ground truth).
        out_mask: fields left out of the comparison (``["thinking"]``: not the reasoning).
        name: the name in logs and history (None: the class name in snake_case).

    Example:

    ```python
    reward = synalinks.rewards.ExactMatch(in_mask=["answer"])
    ```
    """

    def __init__(self, in_mask=None, out_mask=None, name=None):
        super().__init__(name=name, in_mask=in_mask, out_mask=out_mask)

    async def call(self, y_true: MaskedDataModel | None, y_pred: MaskedDataModel) -> float:
        if y_true is None:
            raise ValueError(f"{self.where} needs a ground truth, but y_true is None")
        return 1.0 if dict(y_true) == dict(y_pred) else 0.0
