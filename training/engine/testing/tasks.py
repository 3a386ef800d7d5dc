"""The small real-model task the benches and the slow tests train: sentiment labels for reviews.

One review in, one label out, scored by exact match on the label. It is built the same way by
``bench/fit_randomfewshot.py``, ``bench/omega.py`` and the slow tests that fit with the offline
local models, so it lives here once; each caller keeps its own rows, optimizer and language
model, since those are what it measures. Importable from pytest and from a bench script run as
``.venv/bin/python bench/x.py`` (the benches put the repository root on ``sys.path``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from training.engine.data_model import DataModel
from training.engine.modules import Generator
from training.engine.program import Program
from training.engine.rewards import ExactMatch
from training.engine.symbolic import Input

#: The instructions the untrained program starts from (labels are not named on purpose).
SENTIMENT_INSTRUCTIONS = "Classify the sentiment of the review."


class Review(DataModel):
    review: str


class Sentiment(DataModel):
    label: str


def sentiment_arrays(
    rows: Iterable[tuple[str, str]], labels: Mapping[str, str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` object arrays from ``(review, label)`` rows; ``labels`` renames each label
    (e.g. ``{"positive": "pos"}``, labels the model cannot guess)."""
    rows = list(rows)
    x = np.array([Review(review=review) for review, _ in rows], dtype="object")
    y = np.array(
        [Sentiment(label=labels[label] if labels else label) for _, label in rows],
        dtype="object",
    )
    return x, y


async def sentiment_program(
    language_model: Any,
    optimizer: Any,
    instructions: str | None = SENTIMENT_INSTRUCTIONS,
    name: str = "sentiment",
) -> Program:
    """A one-Generator program ``Review -> Sentiment``, compiled with ExactMatch on ``label``
    and the given optimizer. ``instructions=None`` leaves the Generator's default."""
    inputs = Input(data_model=Review)
    outputs = await Generator(
        data_model=Sentiment,
        language_model=language_model,
        instructions=instructions,
    )(inputs)
    program = Program(inputs=inputs, outputs=outputs, name=name)
    program.compile(reward=ExactMatch(in_mask=["label"]), optimizer=optimizer)
    return program
