"""Scoring every label of a label field instead of sampling one, on each kind of model.

Why: sampling a label takes the model's first pick, and a small model's first pick is biased
(the local 135M model answered only 2 of 4 labels); a score for *every* label lets the
Generator calibrate them and weigh them against other evidence (``modules/label_decision.py``).

How each kind of model is scored:

- **A model whose provider registered a scorer** (:func:`register_scorer`; the offline
  ``local/`` models do): the log-probability of each label's whole continuation (``anger"}``)
  after the shared prompt and the answer's opening (``{"label": "``), the prompt evaluated once.
- **A provider that returns log-probabilities** (OpenAI-compatible servers, litellm's
  ``logprobs``): one request as for sampling, with ``logprobs`` and ``top_logprobs``; a label's
  score is the log-probability of the first token of its value (read where the value starts
  in the answer), and labels that token does not tell apart share it, the sampled one ahead.
- **Anything else**: no scores (None): the Generator samples, as it always did.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from training.engine.language_models import offline

#: Alternatives asked for at each token of a provider's answer (OpenAI allows 0..20).
TOP_LOGPROBS = 20
#: The score of a label no log-probability covers (below any real one, finite for JSON).
UNSEEN = -1000.0


@dataclass
class Scored:
    """What a scorer returns: one log-probability per label, and the tokens it used."""

    scores: list[float]
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class LabelScoring:
    """What ``LanguageModel.score_labels`` found: each label's score, or (a provider that
    answered without log-probabilities) its sampled answer as ``output``."""

    scores: list[float] | None = None
    output: Any = None


#: A provider's scorer: ``(model, messages, opening, continuations, timeout) -> Scored``.
Scorer = Callable[[str, list, str, list, float | None], Awaitable[Scored]]

_SCORERS: dict[str, Scorer] = {}


def register_scorer(provider: str, scorer: Scorer) -> None:
    """Score ``<provider>/…`` models' labels with ``scorer`` (the local provider registers
    its own when it is loaded)."""
    _SCORERS[provider] = scorer


def registered_scorer(model: str) -> Scorer | None:
    if "/" not in model:
        return None
    if offline.serves(model):  # the offline provider registers its scorer when it loads
        offline.ensure_registered()
    return _SCORERS.get(model.split("/", 1)[0])


def opening(field: str) -> str:
    """The answer's text before the label's value: ``{"label": "`` (json.dumps' spacing, as
    the local grammar writes it)."""
    return "{" + json.dumps(field, ensure_ascii=False) + ': "'


def continuation(label: str) -> str:
    """A label's value and the object's end after :func:`opening`: ``anger"}``."""
    return json.dumps(label, ensure_ascii=False)[1:] + "}"


def answer(field: str, label: str) -> str:
    """The whole answer that decides ``label``: ``{"label": "anger"}``."""
    return opening(field) + continuation(label)


def provider_supports_logprobs(model: str) -> bool:
    """Whether litellm says ``model``'s provider takes ``logprobs`` (offline: its table)."""
    from training.engine.language_models.litellm_loader import get_litellm

    try:
        params = get_litellm().get_supported_openai_params(model=model) or []
    except Exception:  # an unknown provider or model: no scores, the caller samples
        return False
    return "logprobs" in params and "top_logprobs" in params


def scores_from_logprobs(
    content: str, tokens: Sequence[Any], field: str, labels: Sequence[str]
) -> list[float] | None:
    """Each label's score from a provider's per-token log-probabilities (OpenAI's
    ``choices[0].logprobs.content``: ``token``, ``logprob``, ``top_logprobs``), or None when
    the answer does not show where the field's value starts.

    The token at which the value starts gives, through its alternatives, a log-probability to
    each label whose value begins with that alternative's text; a label no alternative begins
    gets :data:`UNSEEN`. Labels one token cannot tell apart all get it, the one the model wrote
    a hair ahead (so the decision keeps the model's own choice among them).
    """
    start = _value_start(content, field)
    if start is None:
        return None
    position = 0
    for item in tokens:
        text = _get(item, "token") or ""
        if position + len(text) > start:
            offset = start - position  # the value may start inside this token
            alternatives = [(text[offset:], _get(item, "logprob"))]
            alternatives += [
                (str(_get(alt, "token") or "")[offset:], _get(alt, "logprob"))
                for alt in _get(item, "top_logprobs") or []
            ]
            return _label_scores(content[start:], alternatives, labels)
        position += len(text)
    return None


def _get(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _value_start(content: str, field: str) -> int | None:
    try:
        json.loads(content)
    except ValueError:
        return None
    key = json.dumps(field, ensure_ascii=False)
    at = content.find(key)
    if at < 0:
        return None
    colon = content.find(":", at + len(key))
    quote = content.find('"', colon + 1) if colon >= 0 else -1
    return quote + 1 if quote >= 0 else None


def _label_scores(
    written: str, alternatives: list[tuple[str, Any]], labels: Sequence[str]
) -> list[float]:
    best: dict[str, float] = {}
    for text, logprob in alternatives:
        if not text or not isinstance(logprob, int | float) or not math.isfinite(logprob):
            continue
        for label in labels:
            value = continuation(label)
            if value.startswith(text) or text.startswith(value):
                best[label] = max(best.get(label, UNSEEN), float(logprob))
    chosen = next((label for label in labels if written.startswith(continuation(label))), None)
    return [best.get(label, UNSEEN) + (1e-6 if label == chosen else 0.0) for label in labels]


__all__ = [
    "LabelScoring",
    "Scored",
    "answer",
    "continuation",
    "opening",
    "provider_supports_logprobs",
    "register_scorer",
    "registered_scorer",
    "scores_from_logprobs",
]
