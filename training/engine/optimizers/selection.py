"""Selection rules of OMEGA: which candidate(s) to evolve, which variable, which examples.

All functions take a ``random.Random`` so a seeded fit is reproducible.

- candidates: ``softmax`` (p ∝ exp(reward / selection_temperature)), ``best`` (greedy,
  ties to the earliest) or ``random`` (uniform);
- variables: p ∝ exp(−average reward), so the worst-performing variable gets most attention;
- crossover happens with probability ``merging_rate × epoch`` (0 at epoch 0, capped at 1);
- few-shot examples: how many is uniform in ``nb_min..nb_max``; which ones is a softmax at
  ``sampling_temperature`` over each example's weight (OMEGA weighs by how hard the input was);
- the champion (the value a variable is given): the seed — the value fit started from — unless
  a candidate *beats* it, i.e. scores more than ``TIE`` above it on validation. A 6-example
  validation set scores in steps of 1/6, so many candidates tie the seed exactly; a tie is no
  evidence of an improvement and keeps the seed. Among the candidates that beat it, the highest
  reward wins, ties to the earliest. So a run never ends below its start on validation.
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


#: Rewards closer than this are a tie (float noise of means, not a better candidate).
TIE = 1e-9


def beats(reward: float, seed_reward: float) -> bool:
    """Whether a candidate's validation reward is better than the seed's by more than a tie."""
    return float(reward) > float(seed_reward) + TIE


def champion(candidates: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The scored candidate a variable should take (see the module docstring): the seed (the
    first ``seed`` candidate) unless one beats it; then the best, ties to the earliest. Without
    a scored seed, simply the best."""
    scored = [c for c in candidates if c.get("reward") is not None]
    if not scored:
        return None
    best = max(enumerate(scored), key=lambda pair: (pair[1]["reward"], -pair[0]))[1]
    seed = next((c for c in scored if c.get("operation") == "seed"), None)
    if seed is None or beats(best["reward"], seed["reward"]):
        return best
    return seed


def count_beating(candidates: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(candidates other than the seed that were scored, how many of them beat the seed)."""
    scored = [c for c in candidates if c.get("reward") is not None]
    seed = next((c for c in scored if c.get("operation") == "seed"), None)
    others = [c for c in scored if c is not seed]
    if seed is None:
        return len(others), 0
    return len(others), sum(beats(c["reward"], seed["reward"]) for c in others)


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0
