"""Shared pieces of the judge rewards (``LMAsJudge``, ``ProgramAsJudge``).

A judge reads the prediction (and the ground truth when there is one) and gives
a score. Judges are language models, so they fail sometimes: a failed or
unusable judgement scores 0.0 and is counted on the reward
(``judgements`` / ``failed_judgements``) instead of stopping training.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
from typing import Any

from pydantic import Field

from training.engine.data_model import DataModel

logger = logging.getLogger("training.engine.rewards")

__all__ = ["JudgeInput", "JudgeScore", "JudgeStats", "clamp_score", "to_json_text"]


class JudgeInput(DataModel):
    """What a judge sees: the criteria, the reference answer (if any) and the prediction."""

    criteria: str = Field(description="What the prediction is judged on")
    reference: str | None = Field(
        default=None, description="The correct (gold) answer as JSON, when one is known"
    )
    prediction: str = Field(description="The answer to judge, as JSON")


class JudgeScore(DataModel):
    """A judge's verdict: a short critique first, then a score in [0, 1]."""

    critique: str = Field(description="A short justification of the score")
    score: float = Field(
        description="How well the prediction meets the criteria: 0.0 (not at all) to 1.0 (fully)"
    )


def to_json_text(fields: Any) -> str | None:
    """Compact, stable JSON of the masked fields (``None`` stays ``None``)."""
    if fields is None:
        return None
    return json.dumps(dict(fields), ensure_ascii=False, sort_keys=True)


def clamp_score(value: Any) -> float | None:
    """A judge's number clamped to [0, 1]; ``None`` when it is not a usable number."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    value = float(value)
    if math.isnan(value):
        return None
    return min(max(value, 0.0), 1.0)


class JudgeStats:
    """Counts judgements and failures so a run can report how reliable its judge was."""

    def __init__(self) -> None:
        self.judgements = 0
        self.failed_judgements = 0

    def record(self, score: float | None, where: str, reason: str = "") -> float:
        self.judgements += 1
        if score is None:
            self.failed_judgements += 1
            logger.warning("%s: judgement failed (%s); scoring 0.0", where, reason or "no score")
            return 0.0
        return score
