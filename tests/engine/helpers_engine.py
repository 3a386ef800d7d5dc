"""Shared test helpers for the engine core tests (fake LMs, tiny datasets)."""

from __future__ import annotations

import numpy as np

import training.engine as synalinks


class Query(synalinks.DataModel):
    query: str


class Answer(synalinks.DataModel):
    answer: str


TRUTH = {
    "What is 2+2?": "4",
    "Capital of France?": "Paris",
    "Who wrote Hamlet?": "William Shakespeare",
    "Color of the sky?": "blue",
    "What is 3+3?": "6",
    "Capital of Italy?": "Rome",
    "Largest planet?": "Jupiter",
    "Boiling point of water in C?": "100",
    "Author of 1984?": "George Orwell",
    "Square root of 9?": "3",
}


#: Twelve short reviews the real-model tests fit and evaluate on (a sentiment task).
REVIEWS = [
    ("I loved this film.", "positive"),
    ("Terrible service.", "negative"),
    ("Delicious food, friendly staff.", "positive"),
    ("A boring plot.", "negative"),
    ("Works perfectly, fantastic.", "positive"),
    ("It broke after two days.", "negative"),
    ("Highly recommended!", "positive"),
    ("The worst hotel ever.", "negative"),
    ("Great value.", "positive"),
    ("A waste of money.", "negative"),
    ("Amazing concert.", "positive"),
    ("Rude waiters and cold food.", "negative"),
]


#: Six short reviews the real-model OMEGA tests fit on (small enough for a CPU minute).
LOCAL_OMEGA_ROWS = [
    ("I loved this film, the acting was wonderful.", "positive"),
    ("Terrible plot and painfully boring scenes.", "negative"),
    ("A delightful, charming little story.", "positive"),
    ("The worst meal I have ever eaten.", "negative"),
    ("Great service and friendly staff.", "positive"),
    ("The product broke after one day, awful.", "negative"),
]


def dataset(n: int | None = None):
    items = list(TRUTH.items())[:n]
    x = np.array([Query(query=q) for q, _ in items], dtype="object")
    y = np.array([Answer(answer=a) for _, a in items], dtype="object")
    return x, y


def oracle_lm(**kwargs):
    """Answers every question right."""
    return synalinks.testing.FakeLanguageModel(
        responses={q: {"answer": a} for q, a in TRUTH.items()}, **kwargs
    )


UNPARSABLE = "no JSON here, sorry"


def unparsable_lm():
    """Never answers JSON: every prediction fails after its parse retry."""
    return synalinks.testing.FakeLanguageModel(responder=lambda request: UNPARSABLE)


def few_shot_learner(**kwargs):
    """Answers right only when its prompt holds at least one few-shot example; else 'unknown'.

    Also right for any question that appears verbatim among its examples. A simple model of
    "examples help", to check that RandomFewShot finds and keeps helpful examples.
    """

    def respond(request):
        if request.examples:
            return {"answer": TRUTH.get(request.inputs["query"], "unknown")}
        return {"answer": "unknown"}

    return synalinks.testing.FakeLanguageModel(responder=respond, **kwargs)


async def build_program(
    lm, module=None, name=None, *, input_model=Query, output_model=Answer, **options
):
    """A one-module program on ``lm`` (a Generator unless ``module``) from ``input_model`` to
    ``output_model``, the shape of most test programs; ``options`` go to the module
    (``instructions``, ``examples``...)."""
    module_cls = module or synalinks.Generator
    inputs = synalinks.Input(data_model=input_model)
    outputs = await module_cls(data_model=output_model, language_model=lm, **options)(inputs)
    return synalinks.Program(inputs=inputs, outputs=outputs, name=name)
