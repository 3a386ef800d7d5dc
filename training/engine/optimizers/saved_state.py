"""An optimizer's saved state read back, checked: the candidate rewards a resumed fit need not
score again, and its random generator, so a fit resumed from a checkpoint (after the
dashboard's Pause, say) makes the same draws as one never stopped.

A state is plain JSON from a document: each reader returns None for what is not one, never
trusting it.
"""

from __future__ import annotations

import math
import random
from typing import Any

from training.engine.trainers.candidate_scores import MAX_SAVED_SCORES


def scores_from_state(saved: Any) -> tuple[str, dict[str, float]] | None:
    """(scoring set key, {assignment digest: reward}) from a state's ``candidate_scores``
    (``get_state``), or None when it is not one (checked, never trusted: plain JSON from a
    document; at most ``MAX_SAVED_SCORES`` entries, the latest, are taken)."""
    if not isinstance(saved, dict):
        return None
    key, entries = saved.get("scoring_set_key"), saved.get("scores")
    if not _is_digest(key) or not isinstance(entries, list):
        return None
    scores: dict[str, float] = {}
    for entry in entries[-MAX_SAVED_SCORES:]:
        if not (isinstance(entry, list) and len(entry) == 2 and _is_digest(entry[0])):
            return None
        reward = entry[1]
        if (
            not isinstance(reward, int | float)
            or isinstance(reward, bool)
            or not math.isfinite(reward)
        ):
            return None
        scores[entry[0]] = float(reward)
    return key, scores


def _is_digest(value: Any) -> bool:
    """A sha256 hex digest (64 lower-case hex characters)."""
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


#: ``random.Random.getstate()``'s Mersenne Twister state: 624 words and the position.
_RNG_WORDS = 625


def rng_state(rng: random.Random) -> list[Any]:
    """The optimizer's random generator as JSON (saved in its state, so a fit resumed from a
    checkpoint, e.g. after the dashboard's Pause, makes the same draws as one never stopped)."""
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def rng_from_state(saved: Any) -> random.Random | None:
    """The generator ``rng_state`` saved, or None when ``saved`` is not one (checked, never
    trusted: a state is plain JSON from a document)."""
    try:
        version, internal, gauss = saved
        words = [int(word) for word in internal]
        if (
            version != 3
            or len(words) != _RNG_WORDS
            or any(not 0 <= word < 2**32 for word in words[:-1])
        ):
            return None
        rng = random.Random()
        rng.setstate((3, tuple(words), None if gauss is None else float(gauss)))
        return rng
    except (TypeError, ValueError, OverflowError):
        return None
