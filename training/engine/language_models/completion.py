"""What one provider request returned, and the figures a call's trace carries."""

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
