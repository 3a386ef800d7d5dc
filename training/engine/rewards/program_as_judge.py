"""``ProgramAsJudge``: a whole program (e.g. a ChainOfThought judge) gives the reward."""

from __future__ import annotations

from typing import Any

from training.engine.rewards.judging import JudgeInput, JudgeReward
from training.engine.saving import register_synalinks_serializable

SCORE_FIELDS = ("reward", "score")


@register_synalinks_serializable(package="synalinks")
class ProgramAsJudge(JudgeReward):
    """Use a program as the judge.

    The program takes a :class:`JudgeInput` (``criteria``, ``reference`` and
    ``prediction``, both as JSON text) — build it with
    ``synalinks.Input(data_model=synalinks.rewards.JudgeInput)`` — and its output
    must have a numeric ``reward`` (as in Synalinks) or ``score`` field. The value
    is clamped to [0, 1]; a failed run scores 0.0 and is counted in
    ``failed_judgements``. An output without either field is a configuration
    error and raises.

    Args:
        program: the judge :class:`~training.engine.Program` (required, one input).
        criteria: what the judge scores by (empty: correctness with respect to the
            reference).
        in_mask: the only fields compared (None: every field of the ground truth).
        out_mask: fields left out of the comparison (``["thinking"]``: not the reasoning).
        name: the name in logs and history (None: the class name in snake_case).

    Example:

    ```python
    judge = synalinks.Program(...)
    synalinks.rewards.ProgramAsJudge(program=judge)
    ```
    """

    no_output = "the judge program returned no output"

    def __init__(self, program=None, criteria: str = "", in_mask=None, out_mask=None, name=None):
        if program is None:
            raise ValueError("ProgramAsJudge needs a program (a Program)")
        inputs = getattr(program, "inputs", None)
        if isinstance(inputs, list) and len(inputs) != 1:
            raise ValueError(
                f"ProgramAsJudge: the judge program must have one input "
                f"(Input(data_model=synalinks.rewards.JudgeInput)), it has {len(inputs)}"
            )
        criteria = criteria or "correctness with respect to the reference"
        super().__init__(criteria, name=name, in_mask=in_mask, out_mask=out_mask)
        self.program = program

    async def _ask_judge(self, request: JudgeInput) -> Any:
        return await self.program(request)

    def _read_score(self, verdict: Any) -> tuple[Any, str]:
        fields = verdict.get_json() if hasattr(verdict, "get_json") else dict(verdict)
        field = next((name for name in SCORE_FIELDS if name in fields), None)
        if field is None:
            raise ValueError(
                f"{self.where}: the judge program's output has no 'reward' or 'score' field; "
                f"its fields are {sorted(fields)}"
            )
        return fields[field], field

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["program"] = self.program.get_config()
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None):
        from training.engine.program import Program

        config = dict(config)
        program = Program.from_config(config.pop("program"), custom_objects=custom_objects)
        return cls(program=program, **config)
