"""What scoring one candidate measured, beyond its mean reward.

Why: a mean validation reward alone cannot say whether a candidate's win is real (on 20
examples one answer is 0.05) nor what it costs. The trainer's candidate scorer keeps, for
each scoring, every example's reward (so a page can bootstrap an interval and compare a
candidate with its parent *on the same examples*) and what its prediction calls measured:
prompt tokens and latency per call, as the provider counted them on the prompts the engine
built (instructions + few-shot examples + the output-format note + the example's input; the
inputs are the same scoring set for every candidate, so what differs between candidates is
their instructions and examples).

It also keeps each scoring example's prediction (its output as JSON, None where it failed):
what lets the dashboard score a finished run's candidates again on corrected answers or under
another reward without calling the program again. The first
:data:`MAX_EXAMPLE_PREDICTIONS` ride in the event; the dashboard bounds how many candidates
of a run keep them (``training/execution/recording/candidate_predictions.py``).

These go in the ``candidate`` event (``event_fields``), never in the candidate dict a variable
keeps (which is saved with the program): a program document stays as small as before.

The mean rewards alone are saved (the optimizer's state, ``Optimizer.get_state``), so a fit
paused and resumed does not score again, with LM calls, what it scored before the pause: at
most :data:`MAX_SAVED_SCORES`, each under the sha256 digest of the assignment it scored
(``assignment_digest``), all tagged with the scoring set's digest (``scoring_set_key``) and
reused only for that same set. Plain JSON, never pickle: a state is read from a document.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

#: The most per-example rewards a candidate event carries (the first ones of the scoring
#: set, in order). Past it the interval is over that many examples and says so (``n``).
MAX_EXAMPLE_REWARDS = 1000
#: The most per-example predictions a candidate event carries (the first ones of the scoring
#: set, in order): enough to re-score a candidate, small enough for an event.
MAX_EXAMPLE_PREDICTIONS = 100
#: Digits each reward keeps in an event (a 0/1 reward is exact; a cosine keeps 4 digits).
REWARD_DIGITS = 4
#: The most candidate rewards an optimizer's saved state keeps (the latest scored): what a
#: resumed fit reuses instead of scoring again, at about 90 characters each in the document.
MAX_SAVED_SCORES = 512


@dataclass
class CandidateScore:
    """One scoring of one assignment of values.

    Attributes:
        rewards: each scoring example's reward, in the scoring set's order.
        calls: prediction LM calls made (memoised or cached answers are not calls).
        prompt_tokens: the prompt tokens of those calls, as the provider reported them.
        latency: the seconds those calls took, summed.
        split: which split was scored (``validation``, ``train``, ``selection``).
        predictions: each scoring example's output as JSON (None for a failed prediction),
            in the scoring set's order; empty when the scorer kept none.
    """

    rewards: list[float] = field(default_factory=list)
    calls: int = 0
    prompt_tokens: int = 0
    latency: float = 0.0
    split: str = "validation"
    predictions: list[dict[str, Any] | None] = field(default_factory=list)

    @property
    def reward(self) -> float:
        """The mean reward (0.0 with no example, as the trainer's other means)."""
        return float(sum(self.rewards) / len(self.rewards)) if self.rewards else 0.0

    @property
    def prompt_tokens_per_call(self) -> float | None:
        """Mean prompt tokens of one prediction call (None when no call was made)."""
        return round(self.prompt_tokens / self.calls, 1) if self.calls else None

    @property
    def latency_per_call(self) -> float | None:
        """Mean seconds of one prediction call (None when no call was made)."""
        return round(self.latency / self.calls, 4) if self.calls else None

    def event_fields(self, prefix: str = "") -> dict[str, Any]:
        """The ``candidate`` event's keys for this scoring (``prefix`` names another split's,
        e.g. ``selection_``)."""
        rewards = [round(float(r), REWARD_DIGITS) for r in self.rewards[:MAX_EXAMPLE_REWARDS]]
        fields: dict[str, Any] = {f"{prefix}example_rewards": rewards}
        if not prefix:
            if self.predictions:
                fields["example_predictions"] = list(self.predictions[:MAX_EXAMPLE_PREDICTIONS])
            fields.update(
                {
                    "scoring_calls": self.calls,
                    "prompt_tokens_per_call": self.prompt_tokens_per_call,
                    "latency_per_call": self.latency_per_call,
                }
            )
        return fields


def from_usage(
    rewards: list[float],
    usage: dict[str, Any],
    split: str,
    predictions: list[dict[str, Any] | None] | None = None,
) -> CandidateScore:
    """A :class:`CandidateScore` from the rewards and a ``usage.track()`` dict of the scoring:
    only the ``prediction`` role's calls (a judge reward's calls are not the candidate's);
    ``predictions`` are the outputs as JSON, in order."""
    role = (usage.get("by_role") or {}).get("prediction") or {}
    return CandidateScore(
        rewards=list(rewards),
        calls=int(role.get("calls") or 0),
        prompt_tokens=int(role.get("prompt_tokens") or 0),
        latency=float(role.get("latency") or 0.0),
        split=split,
        predictions=list(predictions or []),
    )


def assignment_digest(assignment_json: str) -> str:
    """The sha256 hex digest under which a scored assignment (its canonical JSON: every
    trainable variable's value) is remembered and saved.

    Example:
        >>> len(assignment_digest('{"generator/state":{"instructions":""}}'))
        64
    """
    return hashlib.sha256(assignment_json.encode("utf-8")).hexdigest()


def scoring_set_key(items: list, targets: list, split: str, reward: Any = None) -> str:
    """The sha256 hex digest of what a candidate's reward depends on besides its values: the
    scoring examples (inputs and targets, in order), the split and the reward's config. Saved
    rewards are reused only by a scorer with the same key, so a resumed fit on other data,
    or under another reward, scores its candidates again.

    Args:
        items: the scoring inputs (DataModels, or lists of them for several inputs).
        targets: the scoring targets (DataModels).
        split: the split scored (``validation``, ``train``, ``selection``).
        reward: the reward's saved config (``serialize(reward)``), or None.

    Returns:
        64 hex characters.
    """
    document = {
        "split": split,
        "items": [_as_json(item) for item in items],
        "targets": [_as_json(target) for target in targets],
        "reward": reward,
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _as_json(value: Any) -> Any:
    if hasattr(value, "get_json"):
        return value.get_json()
    if isinstance(value, list | tuple):
        return [_as_json(v) for v in value]
    return value
