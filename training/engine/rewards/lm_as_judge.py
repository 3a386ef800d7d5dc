"""``LMAsJudge``: a language model grades each prediction against criteria."""

from __future__ import annotations

from typing import Any

import pydantic

from training.engine.language_model import (
    LanguageModelConfigError,
    LanguageModelError,
    LanguageModelUnreachable,
)
from training.engine.masking import MaskedDataModel
from training.engine.rewards.judging import (
    JudgeInput,
    JudgeScore,
    JudgeStats,
    clamp_score,
    to_json_text,
)
from training.engine.rewards.reward import Reward
from training.engine.saving import deserialize, register_synalinks_serializable, serialize

DEFAULT_INSTRUCTIONS = (
    "You are a strict grader. Judge the prediction only on the given criteria. "
    "When a reference answer is given, it is correct: compare the prediction with it. "
    "Write a one-sentence critique, then give a score from 0.0 (fails the criteria) "
    "to 1.0 (fully meets them)."
)


@register_synalinks_serializable(package="synalinks")
class LMAsJudge(Reward):
    """Score predictions with a language model acting as a judge.

    The judge is a ``Generator`` producing :class:`JudgeScore` from a
    :class:`JudgeInput` (criteria, reference JSON, prediction JSON). Its score is
    clamped to [0, 1]; a failed judgement (no output, no usable number, an LM
    error) scores 0.0 and is counted in ``failed_judgements``.
    """

    def __init__(
        self,
        language_model=None,
        criteria: str = "accuracy and completeness",
        instructions: str | None = None,
        in_mask=None,
        out_mask=None,
        name=None,
    ):
        if language_model is None:
            raise ValueError("LMAsJudge needs a language_model (a LanguageModel)")
        if not isinstance(criteria, str) or not criteria.strip():
            raise ValueError(f"LMAsJudge criteria must be a non-empty string, got {criteria!r}")
        super().__init__(name=name, in_mask=in_mask, out_mask=out_mask)
        self.language_model = language_model
        self.criteria = criteria
        self.instructions = instructions
        self.stats = JudgeStats()
        self._generator = None

    @property
    def judgements(self) -> int:
        return self.stats.judgements

    @property
    def failed_judgements(self) -> int:
        return self.stats.failed_judgements

    def _judge(self):
        if self._generator is None:
            from training.engine.modules import Generator

            self._generator = Generator(
                data_model=JudgeScore,
                language_model=self.language_model,
                instructions=self.instructions or DEFAULT_INSTRUCTIONS,
                name=f"{self.name}_judge",
            )
        return self._generator

    async def call(self, y_true: MaskedDataModel | None, y_pred: MaskedDataModel) -> float:
        request = JudgeInput(
            criteria=self.criteria,
            reference=to_json_text(y_true),
            prediction=to_json_text(y_pred),
        )
        try:
            verdict = await self._judge()(request)
        except (LanguageModelUnreachable, LanguageModelConfigError):
            raise  # no judge at all is not a judgement: stop rather than score everything 0
        except (LanguageModelError, pydantic.ValidationError) as exc:
            return self.stats.record(None, self._where, f"{type(exc).__name__}: {exc}")
        if verdict is None:
            return self.stats.record(None, self._where, "the judge returned no output")
        raw = verdict.get("score") if hasattr(verdict, "get") else None
        return self.stats.record(clamp_score(raw), self._where, f"unusable score {raw!r:.40}")

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "criteria": self.criteria,
                "instructions": self.instructions,
                "language_model": serialize(self.language_model),
            }
        )
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None):
        config = dict(config)
        config["language_model"] = deserialize(config.get("language_model"), custom_objects)
        return cls(**config)
