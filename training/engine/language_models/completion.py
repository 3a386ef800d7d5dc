"""One provider request: the answer format it asks for, what it returned, and the figures a
call's trace carries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class RawCompletion:
    """What a provider returned: text, token counts and cost (None when unknown); a label
    scoring's ``scores`` (one per label, or None when the provider gave none)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    scores: list[float] | None = None
    # False when a scoring request came back without any log-probabilities.
    logprobs_returned: bool = True


def new_meta() -> dict[str, Any]:
    """The per-call figures a trace carries, filled in by the retry hooks and the cache."""
    return {
        "latency": 0.0,
        "attempts": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost": None,
        "cache_hit": False,
    }


def response_format(schema: dict, structured_output: str) -> dict[str, Any]:
    """The ``response_format`` a structured request sends: a JSON object with the schema beside
    it (``structured_output="json_object"``), else the strict JSON schema."""
    if structured_output == "json_object":
        return {"type": "json_object", "schema": schema}
    return {
        "type": "json_schema",
        "json_schema": {"name": schema_name(schema), "schema": schema, "strict": True},
    }


def schema_name(schema: dict) -> str:
    """A schema's title as a provider takes a schema name (letters, digits, ``_``, ``-``)."""
    title = str(schema.get("title") or "output")
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in title)[:64] or "output"


def read_response(litellm: Any, response: Any) -> tuple[RawCompletion, Any]:
    """What a litellm completion response says: its text, token counts and cost (None when
    litellm cannot price it), and the answer's per-token log-probabilities (None when absent)."""
    choice = response.choices[0]
    text = choice.message.content or ""
    usage = getattr(response, "usage", None)
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:
        cost = None
    logprobs = getattr(choice, "logprobs", None)
    if isinstance(logprobs, dict):
        logprobs = logprobs.get("content")
    elif logprobs is not None:
        logprobs = getattr(logprobs, "content", None)
    raw = RawCompletion(
        text=text,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cost=cost,
    )
    return raw, logprobs
