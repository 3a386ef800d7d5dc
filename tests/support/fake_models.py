"""The scripted ``fake/…`` models: model strings the test stack resolves without a network.

``fake/<behaviour>[?latency=0.05&failure_rate=0.3&failure=fatal]`` builds the engine's
FakeLanguageModel (no network, no weights) so tests and benchmarks can run a whole training
run in milliseconds; ``fake/<anything>`` as an embedding model is the FakeEmbeddingModel.
``register()`` (called by the ``test_support`` app when Django starts with the test settings)
adds the ``fake`` provider to ``training.programs.lm``; production never does. Behaviours
are responders registered for saving, so a program JSON that uses one loads back in a
worker exactly like a real model:

* ``echo``     copies same-named input fields, leaves the others empty (the engine default);
* ``fewshot``  answers each output field with the most common value among the prompt's
               few-shot examples: reward rises once an optimizer adds examples;
* ``rules``    learns through OMEGA: each mutation adds one rule learnt from a wrong answer of
               the batch (``By default, answer team=bug.``, then keyword rules
               ``When you see "word|other", answer team=box.``), a crossover merges its
               parents' rules, and the answers follow the instructions' rules (then the
               few-shot majority): reward rises as useful rules accumulate;
* ``judge``    a judge (``LMAsJudge``): scores 1.0 when the prediction holds each value of the
               reference (case-insensitive), else 0.0;
* ``keywords`` answers the team its message's words name (``LABEL_WORDS``) once its prompt
               holds an example, else nothing: an optimizer that adds examples wins by far,
               beyond noise on a few validation rows;
* ``scores``   scores every label like a biased small model (the first label listed far
               ahead, the label whose words the input holds nudged up, not enough to win):
               CalibratedLabels learns the bias that turns it right; it samples as
               ``fewshot``;
* ``xss``      answers every string field with a ``<script>`` tag (escaping tests);
* ``unreachable`` refuses every connection (fails the run fast).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from training.engine.saving import register_synalinks_serializable
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel, FakeRequest
from training.programs import lm
from training.programs.lm import ModelStringError

PREFIX = "fake"

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


RULE = re.compile(
    r'When you see "(?P<words>[^"]+)", answer (?P<field>\w+)=(?P<value>[^\n]*?)\.$', re.M
)
DEFAULT_RULE = re.compile(r"By default, answer (?P<field>\w+)=(?P<value>[^\n]*?)\.$", re.M)
_WORD = re.compile(r"[a-z][a-z-]{4,}")  # on lower-cased text: words of 5+ letters
RULE_WORDS = 6


def _text_of(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(_text_of(item) for item in value.values())
    if isinstance(value, list):
        return " ".join(_text_of(item) for item in value)
    return "" if value is None else str(value)


def _new_rule(instructions: str, batch: list[dict]) -> str | None:
    """One rule learnt from the first wrong answer of the batch: a default answer first (its
    label), then keyword rules (its longest words not in a rule yet → its label)."""
    known = {w for m in RULE.finditer(instructions) for w in m["words"].split("|")}
    has_default = DEFAULT_RULE.search(instructions) is not None
    for row in batch or []:
        truth, prediction = row.get("ground_truth"), row.get("prediction")
        if not isinstance(truth, dict) or prediction == truth:
            continue
        for field, value in truth.items():
            if not isinstance(value, str | int | float) or not str(value).strip():
                continue
            if not has_default:
                return f"By default, answer {field}={value}."
            words = set(_WORD.findall(_text_of(row.get("inputs")).lower())) - known
            if words:
                chosen = sorted(words, key=lambda word: (-len(word), word))[:RULE_WORDS]
                return f'When you see "{"|".join(chosen)}", answer {field}={value}.'
    return None


def _lines(text: Any) -> list[str]:
    return [line for line in str(text or "").splitlines() if line.strip()]


@register_synalinks_serializable(package="trainboard")
def rules_responder(request: FakeRequest) -> dict[str, Any]:
    module = request.module or ""
    answer = request.default_output()
    if module.startswith("omega_mutation"):
        current = (request.inputs.get("current_variable") or {}).get("instructions", "")
        rule = _new_rule(str(current or ""), request.inputs.get("batch") or [])
        answer["instructions"] = "\n".join(_lines(current) + ([rule] if rule else []))
        answer["thinking"] = "a wrong answer: add a rule" if rule else "nothing to add"
        return answer
    if module.startswith("omega_crossover"):
        lines: list[str] = []
        for key in ("candidate_a", "candidate_b"):
            for line in _lines((request.inputs.get(key) or {}).get("instructions")):
                if line not in lines:
                    lines.append(line)
        answer["instructions"] = "\n".join(lines)
        answer["thinking"] = "keep the rules of both"
        return answer
    answer = fewshot_responder(request)
    words = set(_WORD.findall(_text_of(request.inputs).lower()))
    instructions = request.instructions or ""
    rules = [
        (set(m["words"].split("|")), m["field"], m["value"]) for m in RULE.finditer(instructions)
    ]
    rules += [(None, m["field"], m["value"]) for m in DEFAULT_RULE.finditer(instructions)]
    for keywords, field, value in rules:
        if (
            field in answer
            and field not in request.inputs
            and (keywords is None or words & keywords)
        ):
            answer[field] = value
            break
    return answer


@register_synalinks_serializable(package="trainboard")
def xss_responder(request: FakeRequest) -> dict[str, Any]:
    answer = request.default_output()
    properties = (request.schema or {}).get("properties", {})
    for field, spec in properties.items():
        if isinstance(spec, dict) and spec.get("type") == "string":
            answer[field] = XSS_PAYLOAD
    return answer


@register_synalinks_serializable(package="trainboard")
def judge_responder(request: FakeRequest) -> dict[str, Any]:
    answer = request.default_output()
    reference = str(request.inputs.get("reference") or "")
    prediction = str(request.inputs.get("prediction") or "").lower()
    values = re.findall(r'"[^"]*":\s*"([^"]*)"', reference)
    right = bool(values) and all(value.lower() in prediction for value in values)
    return {
        **answer,
        "critique": "holds the reference" if right else "misses it",
        "score": float(right),
    }


#: The words that nudge the ``scores`` model towards a label (the demo's teams and a few more).
LABEL_WORDS = {
    "money": ("charge", "refund", "invoice", "payment", "fee", "bill", "card", "receipt", "price"),
    "bug": ("crash", "error", "log in", "login", "button", "page", "broken", "slow", "sync"),
    "box": ("package", "parcel", "delivery", "deliver", "courier", "shipping", "box", "tracking"),
}


@register_synalinks_serializable(package="trainboard")
def biased_label_scores(request: FakeRequest, labels: list[str]) -> list[float]:
    text = _text_of(request.inputs).lower()
    scores = []
    for position, label in enumerate(labels):
        nudge = 1.5 if any(word in text for word in LABEL_WORDS.get(label, ())) else 0.0
        scores.append((-0.2 if position == 0 else -3.0 - 0.5 * position) + nudge)
    return scores


@register_synalinks_serializable(package="trainboard")
def keywords_responder(request: FakeRequest) -> dict[str, Any]:
    answer = fewshot_responder(request)
    if not request.examples:
        return request.default_output()
    text = _text_of(request.inputs).lower()
    for field in answer:
        if field in request.inputs:
            continue
        for label, words in LABEL_WORDS.items():
            if any(word in text for word in words):
                answer[field] = label
                break
    return answer


FAKE_BEHAVIOURS = {
    "keywords": keywords_responder,
    "scores": fewshot_responder,
    "echo": None,
    "fewshot": fewshot_responder,
    "rules": rules_responder,
    "judge": judge_responder,
    "xss": xss_responder,
    "unreachable": None,
}


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
    if behaviour == "scores":
        kwargs["label_scorer"] = biased_label_scores
    return kwargs


def make_fake_language_model(
    model: str, temperature: float = 0.0, api_base: str = "", max_tokens: int | None = None
) -> FakeLanguageModel:
    return FakeLanguageModel(temperature=temperature, **parse_fake(model))


def register() -> None:
    """Make ``fake/…`` model strings resolvable in this process (test settings only)."""
    lm.register_provider(
        PREFIX,
        lm.ModelProvider(
            language_model=make_fake_language_model,
            embedding_model=lambda model: FakeEmbeddingModel(model=model),
            address="the scripted fake provider",
        ),
    )
