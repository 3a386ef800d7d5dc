"""Selection rules of OMEGA: which candidate(s) to evolve, which variable, which examples.

All functions take a ``random.Random`` so a seeded fit is reproducible.

- candidates: ``softmax`` (p ∝ exp(reward / selection_temperature)), ``best`` (greedy,
  ties to the earliest) or ``random`` (uniform);
- variables: p ∝ exp(−average reward), so the worst-performing variable gets most attention;
- crossover happens with probability ``merging_rate × epoch`` (0 at epoch 0, capped at 1);
- few-shot examples: how many is uniform in ``nb_min..nb_max``; which ones is a softmax at
  ``sampling_temperature`` over each example's weight (OMEGA weighs by how hard the input was);
- the champion (the value a variable takes at each epoch end and after fit): the **seed** — the
  value fit started from — unless a candidate *beats* it **beyond noise**: the paired
  bootstrap interval (:data:`CONFIDENCE`, :data:`RESAMPLES`; the interval the dashboard draws)
  of its gain over the seed, on the same scored examples, lies above 0 (:func:`verdict`). A
  higher mean on a small validation split is not evidence: on 24 examples a candidate two
  examples ahead is within noise, and adopting such candidates is how a trained program ends
  below its seed on the test split. The evidence is each candidate's per-example rewards on
  the scoring set (``example_rewards``) and, when its optimizer can score it on more held-out
  examples without an LM call, those too (``held_out``: CalibratedLabels' cross-fitted
  training rows). Candidates without per-example rewards (a scorer that gives only a mean)
  must beat the seed by one example's worth (``tie_margin``: 1/n of the reward's range).
  Among the candidates that beat the seed the highest reward wins, ties to the earliest;
  ``count_beating`` says how many beat it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np

SELECTIONS = ("random", "best", "softmax")


def softmax(values: Sequence[float], temperature: float = 1.0) -> np.ndarray:
    """Numerically stable softmax of ``values / temperature`` (temperature must be > 0)."""
    if temperature <= 0:
        raise ValueError(f"softmax temperature must be > 0, got {temperature}")
    array = np.asarray(values, dtype=float) / temperature
    if array.size == 0:
        return array
    array = np.exp(array - array.max())
    return array / array.sum()


def _draw(probabilities: Sequence[float], rng: random.Random) -> int:
    threshold = rng.random()
    cumulative = 0.0
    for index, probability in enumerate(probabilities):
        cumulative += float(probability)
        if threshold < cumulative:
            return index
    return len(probabilities) - 1


def selection_probabilities(
    rewards: Sequence[float], selection: str, temperature: float
) -> np.ndarray:
    """Probability of picking each candidate under ``selection``."""
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    count = len(rewards)
    if count == 0:
        return np.zeros(0)
    if selection == "random":
        return np.full(count, 1.0 / count)
    if selection == "best":
        probabilities = np.zeros(count)
        probabilities[int(np.argmax(np.asarray(rewards, dtype=float)))] = 1.0  # first maximum
        return probabilities
    return softmax(rewards, temperature)


def select_index(
    rewards: Sequence[float], selection: str, temperature: float, rng: random.Random
) -> int:
    """One candidate index drawn under ``selection``."""
    if not len(rewards):
        raise ValueError("select_index: no candidates to select from")
    return _draw(selection_probabilities(rewards, selection, temperature), rng)


def select_indices(
    rewards: Sequence[float], count: int, selection: str, temperature: float, rng: random.Random
) -> list[int]:
    """``count`` distinct indices, drawn one after the other without replacement."""
    if count > len(rewards):
        raise ValueError(f"select_indices: cannot pick {count} of {len(rewards)} candidates")
    remaining = list(range(len(rewards)))
    chosen: list[int] = []
    for _ in range(count):
        pick = select_index([rewards[i] for i in remaining], selection, temperature, rng)
        chosen.append(remaining.pop(pick))
    return chosen


def crossover_probability(merging_rate: float, epoch: int) -> float:
    """``merging_rate × epoch``, clipped to [0, 1] (0 at epoch 0: all mutations)."""
    return min(1.0, max(0.0, float(merging_rate) * int(epoch)))


def variable_probabilities(average_rewards: Sequence[float]) -> np.ndarray:
    """p ∝ exp(−average reward): worse variables are picked more often."""
    return softmax([-float(r) for r in average_rewards], 1.0)


def select_variable(average_rewards: Sequence[float], rng: random.Random) -> int:
    return _draw(variable_probabilities(average_rewards), rng)


def sample_examples(
    pool: Sequence[dict[str, Any]],
    weights: Sequence[float],
    nb_min: int,
    nb_max: int,
    temperature: float,
    rng: random.Random,
) -> list[dict[str, Any]]:
    """Between ``nb_min`` and ``nb_max`` distinct examples (as many as the pool allows), each
    draw a softmax at ``temperature`` over the remaining examples' weights."""
    if not pool or nb_max <= 0:
        return []
    high = min(nb_max, len(pool))
    low = min(nb_min, high)
    count = rng.randint(low, high)
    indices = select_indices(list(weights), count, "softmax", temperature, rng)
    return [pool[i] for i in indices]


#: The margin when the scoring set's size is unknown: only float noise is a tie.
MIN_TIE_MARGIN = 1e-9
#: The paired interval a candidate's gain over the seed must clear, and how it is drawn
#: (seeded: the same rewards give the same verdict here and on the dashboard).
CONFIDENCE = 0.95
RESAMPLES = 2000


def tie_margin(examples: int | None) -> float:
    """How much a candidate must beat the seed by: one example's worth of an ``examples``-item
    validation set (``1 / examples``), a float epsilon when the size is unknown."""
    if not examples or examples <= 0:
        return MIN_TIE_MARGIN
    return 1.0 / int(examples)


def beats(reward: float, seed_reward: float, margin: float) -> bool:
    """Whether ``reward`` beats ``seed_reward`` by at least ``margin`` (float noise allowed)."""
    return float(reward) - float(seed_reward) >= float(margin) - MIN_TIE_MARGIN


def _seed(scored: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    return next((c for c in scored if c.get("operation") == "seed"), None)


def evidence(
    seed: dict[str, Any], candidate: dict[str, Any]
) -> tuple[list[float], list[float]] | None:
    """(the seed's rewards, the candidate's) on the examples both were scored on: the scoring
    set's, then the candidate's ``held_out`` ones; None without per-example rewards."""
    before, after = seed.get("example_rewards"), candidate.get("example_rewards")
    if not before or not after or len(before) != len(after):
        return None
    before, after = list(before), list(after)
    held_out = candidate.get("held_out") or {}
    if len(held_out.get("seed") or []) == len(held_out.get("candidate") or []):
        before += list(held_out.get("seed") or [])
        after += list(held_out.get("candidate") or [])
    return before, after


def verdict(seed: dict[str, Any], candidate: dict[str, Any]) -> Any:
    """The paired bootstrap of ``candidate``'s gain over ``seed`` (:func:`evidence`), or None
    without per-example rewards."""
    from training.engine.utils.paired_bootstrap import paired_bootstrap

    pairs = evidence(seed, candidate)
    if pairs is None:
        return None
    return paired_bootstrap(*pairs, confidence=CONFIDENCE, resamples=RESAMPLES)


def beats_seed(candidate: dict[str, Any], seed: dict[str, Any], margin: float) -> bool:
    """Whether ``candidate`` beats ``seed`` beyond noise (its paired interval above 0), or,
    when the scorer gives neither of them per-example rewards, by ``margin``. One of them
    with rewards and the other without (a score remembered from a saved state) cannot be
    paired: no evidence beyond noise, so no. Remembered on the candidate (``gain``), so a
    state saved and loaded keeps the verdict it had."""
    if candidate is seed:
        return False
    gain = candidate.get("gain")
    if not isinstance(gain, dict) or gain.get("seed_id") != seed.get("id"):
        found = verdict(seed, candidate)
        if found is None:
            if candidate.get("example_rewards") or seed.get("example_rewards"):
                return False
            return beats(candidate["reward"], seed["reward"], margin)
        gain = {
            "seed_id": seed.get("id"),
            "difference": round(found.difference, 6),
            "low": round(found.low, 6),
            "high": round(found.high, 6),
            "n": found.n,
        }
        candidate["gain"] = gain
    return float(gain["low"]) > 0.0


def champion(candidates: Sequence[dict[str, Any]], margin: float) -> dict[str, Any] | None:
    """The scored candidate a variable takes (see the module docstring): the seed unless some
    beat it beyond noise (:func:`beats_seed`), then the best of those (ties to the earliest).
    Without a scored seed, simply the best."""
    scored = [c for c in candidates if c.get("reward") is not None]
    if not scored:
        return None
    seed = _seed(scored)
    if seed is None:
        return max(enumerate(scored), key=lambda pair: (pair[1]["reward"], -pair[0]))[1]
    winners = [(i, c) for i, c in enumerate(scored) if beats_seed(c, seed, margin)]
    if not winners:
        return seed
    return max(winners, key=lambda pair: (pair[1]["reward"], -pair[0]))[1]


def count_beating(candidates: Sequence[dict[str, Any]], margin: float) -> tuple[int, int]:
    """(scored candidates other than the seed, how many of them beat it: :func:`beats_seed`)."""
    scored = [c for c in candidates if c.get("reward") is not None]
    seed = _seed(scored)
    others = [c for c in scored if c is not seed]
    if seed is None:
        return len(others), 0
    return len(others), sum(beats_seed(c, seed, margin) for c in others)


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0
