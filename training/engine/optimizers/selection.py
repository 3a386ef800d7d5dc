"""Selection rules of OMEGA: which candidate(s) to evolve, which variable, which examples.

All functions take a ``random.Random`` so a seeded fit is reproducible.

- candidates: ``softmax`` (p ∝ exp(reward / selection_temperature)), ``best`` (greedy,
  ties to the earliest) or ``random`` (uniform);
- variables: p ∝ exp(−average reward), so the worst-performing variable gets most attention;
- crossover happens with probability ``merging_rate × epoch`` (0 at epoch 0, capped at 1);
- few-shot examples: how many is uniform in ``nb_min..nb_max``; which ones is a softmax at
  ``sampling_temperature`` over each example's weight (OMEGA weighs by how hard the input was);
- the champion (the value a variable takes at each epoch end and after fit): the **seed** — the
  value fit started from — unless a candidate *beats* it: scores at least one validation
  example's worth above it (``tie_margin``: 1/n of the reward's 0..1 range on an n-example
  validation set). Closer scores are a tie: on 6 examples every score moves in steps of 1/6,
  and a candidate that differs by less than one example going from wrong to right is no
  evidence of anything. Among the candidates that beat the seed the highest reward wins, ties
  to the earliest. The champion's validation reward is never below the seed's, so a run never
  ends below its start on validation. ``count_beating`` says how many candidates beat it.
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


def champion(candidates: Sequence[dict[str, Any]], margin: float) -> dict[str, Any] | None:
    """The scored candidate a variable takes (see the module docstring): the seed unless one
    beats it by ``margin``, then the best of those (ties to the earliest). Without a scored
    seed, simply the best."""
    scored = [c for c in candidates if c.get("reward") is not None]
    if not scored:
        return None
    best = max(enumerate(scored), key=lambda pair: (pair[1]["reward"], -pair[0]))[1]
    seed = _seed(scored)
    if seed is None or beats(best["reward"], seed["reward"], margin):
        return best
    return seed


def count_beating(candidates: Sequence[dict[str, Any]], margin: float) -> tuple[int, int]:
    """(scored candidates other than the seed, how many of them beat the seed by ``margin``)."""
    scored = [c for c in candidates if c.get("reward") is not None]
    seed = _seed(scored)
    others = [c for c in scored if c is not seed]
    if seed is None:
        return len(others), 0
    return len(others), sum(beats(c["reward"], seed["reward"], margin) for c in others)


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0
