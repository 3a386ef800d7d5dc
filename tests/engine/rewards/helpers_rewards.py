"""Shared DataModels and custom functions of the reward and metric tests.

``Query`` and ``Answer`` are the engine tests' own (``helpers_engine``); the
reward and metric tests add a ChainOfThought-style output with ``thinking``.
"""

from __future__ import annotations

import training.engine as synalinks
from tests.engine.helpers_engine import Answer, Query

__all__ = ["Answer", "AnswerWithThinking", "Query", "word_overlap_reward"]


class AnswerWithThinking(synalinks.DataModel):
    thinking: str
    answer: str


@synalinks.saving.register_synalinks_serializable()
async def word_overlap_reward(y_true, y_pred):
    """The guide's custom reward ``my_reward`` (partial word overlap), body verbatim."""
    true_val = y_true.get("answer") if y_true else None
    pred_val = y_pred.get("answer") if y_pred else None

    if true_val is None or pred_val is None:
        return 0.0

    # Partial match example
    true_words = set(true_val.lower().split())
    pred_words = set(pred_val.lower().split())
    overlap = len(true_words & pred_words)
    return overlap / max(len(true_words), 1)
