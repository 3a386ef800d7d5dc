"""The catalogue of built-in datasets shipped under datasets/builtin/ (see its README).

GSM8K is not copied here: the engine already ships a sample of it for
``training.engine.datasets.gsm8k.load_data()``, and the built-in reads that same file.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
ENGINE_GSM8K = (
    Path(__file__).resolve().parent.parent / "training" / "engine" / "datasets" / "data" / "gsm8k"
)
_CALCULATOR = re.compile(r"<<[^<>]*>>")


def gsm8k_row(values: dict[str, Any]) -> dict[str, Any]:
    """Raw GSM8K ``{"question", "answer"}`` -> question, thinking and numeric answer.

    Same rule as the engine's gsm8k.parse_row: the solution is split at its last
    ``####``; calculator annotations (``<<48/2=24>>``) are dropped from the thinking.
    """
    solution = values.get("answer")
    if not isinstance(solution, str) or "####" not in solution:
        raise ValueError("the answer has no '#### <number>' final line")
    reasoning, _, final = solution.rpartition("####")
    number = float(final.strip().replace(",", "").replace("$", ""))
    return {
        "question": str(values.get("question", "")).strip(),
        "thinking": _CALCULATOR.sub("", reasoning).strip(),
        "answer": number,
    }


@dataclass(frozen=True)
class Builtin:
    key: str
    name: str
    description: str
    source: str  # citation shown in the UI
    licence: str
    filename: str  # JSON Lines, relative to BUILTIN_DIR unless ``folder`` is given
    input_fields: list[dict[str, str]] = field(default_factory=list)
    target_fields: list[dict[str, str]] = field(default_factory=list)
    test_ratio: float = 0.2
    seed: int = 42
    folder: Path = BUILTIN_DIR
    # Turns a row of the file into {field name: value}; None when the keys already are.
    transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def path(self) -> Path:
        return self.folder / self.filename


def _field(name: str, type_: str, description: str) -> dict[str, str]:
    return {"name": name, "type": type_, "description": description}


BUILTINS: dict[str, Builtin] = {
    item.key: item
    for item in [
        Builtin(
            key="demo",
            name="Demo: route support messages",
            description=(
                "48 short customer messages, each routed to one of three teams by a code "
                "name: money (billing), bug (technical problems), box (delivery). The "
                "codes cannot be guessed, so few-shot examples help quickly."
            ),
            source="Written for Trainboard",
            licence="Project licence",
            filename="demo/data.jsonl",
            input_fields=[_field("message", "str", "A customer's message to support.")],
            target_fields=[_field("team", "str", "The team that handles it: money, bug or box.")],
            test_ratio=0.25,
        ),
        Builtin(
            key="gsm8k",
            name="GSM8K sample (math word problems)",
            description=(
                "300 grade-school math word problems with worked solutions and the final "
                "numeric answer."
            ),
            source=(
                "Cobbe et al. 2021, Training Verifiers to Solve Math Word Problems; "
                "github.com/openai/grade-school-math"
            ),
            licence="MIT (Copyright (c) 2021 OpenAI)",
            filename="train.jsonl",
            folder=ENGINE_GSM8K,
            transform=gsm8k_row,
            input_fields=[_field("question", "str", "A grade-school math word problem.")],
            target_fields=[
                _field("thinking", "str", "Step-by-step reasoning that solves the problem."),
                _field("answer", "float", "The final numeric answer."),
            ],
        ),
        Builtin(
            key="tweeteval_sentiment",
            name="TweetEval sentiment sample",
            description="300 tweets labelled negative, neutral or positive.",
            source=(
                "Barbieri et al. 2020, TweetEval; Rosenthal et al. 2017, SemEval-2017 Task 4; "
                "github.com/cardiffnlp/tweeteval"
            ),
            licence="Research use; cite the papers (see datasets/builtin/README.md)",
            filename="tweeteval_sentiment/data.jsonl",
            input_fields=[_field("text", "str", "A tweet.")],
            target_fields=[
                _field("label", "str", "The tweet's sentiment: negative, neutral or positive.")
            ],
        ),
    ]
}
