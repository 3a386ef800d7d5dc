"""Model strings → engine LanguageModel objects, including scripted ``fake/…`` models.

``fake/<behaviour>[?latency=0.05&failure_rate=0.3&failure=fatal]`` builds the engine's
FakeLanguageModel (no network, no weights) so tests, benchmarks and demos can run a whole
training run in milliseconds. Behaviours are responders registered for saving, so a program
JSON that uses one loads back in a worker exactly like a real model:

* ``echo``     copies same-named input fields, leaves the others empty (the engine default);
* ``fewshot``  answers each output field with the most common value among the prompt's
               few-shot examples: reward rises once an optimizer adds examples;
* ``xss``      answers every string field with a ``<script>`` tag (escaping tests);
* ``unreachable`` refuses every connection (fails the run fast).
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import training.engine as synalinks
from training.engine.saving import register_synalinks_serializable
from training.engine.testing.fake_language_model import FakeLanguageModel, FakeRequest

XSS_PAYLOAD = "<script>window.__xss = 1</script><b>bold?</b>"


@register_synalinks_serializable(package="trainboard")
def fewshot_responder(request: FakeRequest) -> dict[str, Any]:
    answer = request.default_output()
    examples = request.examples or []
    for field in list(answer):
        if field in request.inputs:
            continue
        values = [
            example.get("outputs", {}).get(field)
            for example in examples
            if isinstance(example.get("outputs"), dict)
        ]
        values = [value for value in values if value is not None]
        if values:
            answer[field] = Counter(map(str, values)).most_common(1)[0][0]
    return answer


@register_synalinks_serializable(package="trainboard")
def xss_responder(request: FakeRequest) -> dict[str, Any]:
    answer = request.default_output()
    properties = (request.schema or {}).get("properties", {})
    for field, spec in properties.items():
        if isinstance(spec, dict) and spec.get("type") == "string":
            answer[field] = XSS_PAYLOAD
    return answer


FAKE_BEHAVIOURS = {
    "echo": None,
    "fewshot": fewshot_responder,
    "xss": xss_responder,
    "unreachable": None,
}


class ModelStringError(ValueError):
    """A model string the dashboard cannot turn into a language model."""


def parse_fake(model: str) -> dict[str, Any]:
    """Keyword arguments of FakeLanguageModel for a ``fake/…`` model string."""
    parts = urlsplit(model)
    behaviour = model[len("fake/") :].split("?", 1)[0]
    if behaviour not in FAKE_BEHAVIOURS:
        raise ModelStringError(
            f"unknown fake model {behaviour!r}: use one of "
            + ", ".join(f"fake/{name}" for name in FAKE_BEHAVIOURS)
        )
    kwargs: dict[str, Any] = {"model": model, "responder": FAKE_BEHAVIOURS[behaviour]}
    for key, value in parse_qsl(parts.query):
        try:
            if key in ("latency", "failure_rate"):
                kwargs[key] = float(value)
            elif key == "seed":
                kwargs[key] = int(value)
            elif key == "failure":
                kwargs[key] = value
            else:
                raise ModelStringError(
                    f"fake model option {key!r} is not one of latency, failure_rate, failure, seed"
                )
        except ValueError as exc:
            raise ModelStringError(f"fake model option {key}={value!r}: {exc}") from None
    if behaviour == "unreachable":
        kwargs.update(failure="unreachable", failure_rate=1.0)
    return kwargs


def make_language_model(
    model: str, temperature: float = 0.0, api_base: str = "", max_tokens: int | None = None
) -> Any:
    """The engine LM for a model string (``provider/name``) or a ``fake/…`` string."""
    model = (model or "").strip()
    if not model:
        raise ModelStringError("a model string is required, e.g. local/smollm2")
    if model.startswith("fake/"):
        kwargs = parse_fake(model)
        return FakeLanguageModel(temperature=temperature, **kwargs)
    if "/" not in model:
        raise ModelStringError(
            f"model {model!r} must look like provider/name (e.g. local/smollm2, openai/gpt-4o-mini)"
        )
    return synalinks.LanguageModel(
        model=model,
        temperature=temperature,
        api_base=api_base or None,
        max_tokens=max_tokens or None,
    )


def make_embedding_model(model: str) -> Any:
    """The engine embedding model (``fake/…`` → the scripted fake embedding model)."""
    if model.startswith("fake/"):
        return synalinks.testing.FakeEmbeddingModel()
    return synalinks.EmbeddingModel(model=model)


def describe_address(language_model: Any) -> str:
    """Where a model is reached, for error messages ("the local process", an api_base...)."""
    model = getattr(language_model, "model", "?")
    api_base = getattr(language_model, "api_base", None)
    if api_base:
        return api_base
    if model.startswith("local/"):
        return "the local llama-cpp provider in the worker"
    if model.startswith("fake/"):
        return "the scripted fake provider"
    provider = model.split("/", 1)[0]
    return f"the default {provider} endpoint (set an API base to change it)"
