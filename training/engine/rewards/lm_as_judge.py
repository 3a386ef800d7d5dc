"""``LMAsJudge``: a language model grades each prediction against criteria."""

from __future__ import annotations

from typing import Any

from training.engine.rewards.judging import JudgeInput, JudgeReward, JudgeScore
from training.engine.saving import deserialize, register_synalinks_serializable, serialize

DEFAULT_INSTRUCTIONS = (
    "You are a strict grader. Judge the prediction only on the given criteria. "
    "When a reference answer is given, it is correct: compare the prediction with it. "
    "Write a one-sentence critique, then give a score from 0.0 (fails the criteria) "
    "to 1.0 (fully meets them)."
)


@register_synalinks_serializable(package="synalinks")
class LMAsJudge(JudgeReward):
    """Score predictions with a language model acting as a judge.

    The judge is a ``Generator`` producing :class:`JudgeScore` from a
    :class:`JudgeInput` (criteria, reference JSON, prediction JSON). Its score is
    clamped to [0, 1]; a failed judgement (no output, no usable number, an LM
    error) scores 0.0 and is counted in ``failed_judgements``.

    Args:
        language_model: the judge's :class:`~training.engine.LanguageModel` (required).
        criteria: what the judge scores by, a non-empty string.
        instructions: the judge's instructions (None: the built-in ones).
        in_mask: the only fields compared (None: every field of the ground truth).
        out_mask: fields left out of the comparison (``["thinking"]``: not the reasoning).
        name: the name in logs and history (None: the class name in snake_case).

    Example:

    ```python
    synalinks.rewards.LMAsJudge(language_model=lm, criteria="accuracy and completeness")
    ```
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
        super().__init__(criteria, name=name, in_mask=in_mask, out_mask=out_mask)
        self.language_model = language_model
        self.instructions = instructions
        self._generator = None

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

    @property
    def judge(self):
        """The ``Generator`` that grades, built for a :class:`JudgeInput`: what formats each
        judgement's prompt."""
        generator = self._judge()
        if not generator.built:
            generator.build([JudgeInput])
        return generator

    async def _ask_judge(self, request: JudgeInput) -> Any:
        return await self._judge()(request)

    def _read_score(self, verdict: Any) -> tuple[Any, str]:
        return (verdict.get("score") if hasattr(verdict, "get") else None), "score"

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["instructions"] = self.instructions
        config["language_model"] = serialize(self.language_model)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None):
        config = dict(config)
        config["language_model"] = deserialize(config.get("language_model"), custom_objects)
        return cls(**config)
