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

import pydantic
from pydantic import Field

from training.engine.data_model import DataModel
from training.engine.language_models.errors import (
    LanguageModelConfigError,
    LanguageModelError,
    LanguageModelUnreachable,
)
from training.engine.masking import MaskedDataModel
from training.engine.rewards.reward import Reward

logger = logging.getLogger("training.engine.rewards")

__all__ = [
    "JudgeInput",
    "JudgeReward",
    "JudgeScore",
    "JudgeStats",
    "clamp_score",
    "to_json_text",
]


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


class JudgeReward(Reward):
    """Base of ``LMAsJudge`` and ``ProgramAsJudge``: ask a judge, count its failures.

    Subclasses say how to ask (``_ask_judge``) and where the verdict keeps its
    score (``_read_score``). No judge at all (unreachable, misconfigured) stops
    the run; a failed or unusable judgement scores 0.0 and is counted.

    Args:
        criteria: what the judge is asked to judge by (``"accuracy and completeness"``).
        in_mask: the only fields compared (None: every field of the ground truth).
        out_mask: fields left out of the comparison (``["thinking"]``: not the reasoning).
        name: the name in logs and history (None: the class name in snake_case).
    """

    # the warning logged when the judge gives nothing back
    no_output = "the judge returned no output"

    def __init__(self, criteria: str, in_mask=None, out_mask=None, name=None):
        super().__init__(name=name, in_mask=in_mask, out_mask=out_mask)
        self.criteria = criteria
        self.stats = JudgeStats()

    @property
    def judgements(self) -> int:
        return self.stats.judgements

    @property
    def failed_judgements(self) -> int:
        return self.stats.failed_judgements

    async def _ask_judge(self, request: JudgeInput) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement `_ask_judge(request)`")

    def _read_score(self, verdict: Any) -> tuple[Any, str]:
        """The verdict's raw score and what to call it in a warning (e.g. ``"score"``)."""
        raise NotImplementedError(f"{type(self).__name__} must implement `_read_score(verdict)`")

    async def call(self, y_true: MaskedDataModel | None, y_pred: MaskedDataModel) -> float:
        request = JudgeInput(
            criteria=self.criteria,
            reference=to_json_text(y_true),
            prediction=to_json_text(y_pred),
        )
        try:
            verdict = await self._ask_judge(request)
        except (LanguageModelUnreachable, LanguageModelConfigError):
            raise  # no judge at all is not a judgement: stop rather than score everything 0
        except (LanguageModelError, pydantic.ValidationError) as exc:
            return self.stats.record(None, self.where, f"{type(exc).__name__}: {exc}")
        if verdict is None:
            return self.stats.record(None, self.where, self.no_output)
        raw, label = self._read_score(verdict)
        return self.stats.record(clamp_score(raw), self.where, f"unusable {label} {raw!r:.40}")

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["criteria"] = self.criteria
        return config
