"""OMEGA's selection rules, checked statistically with a seeded generator."""

import math
import random
from collections import Counter

import numpy as np
import pytest

from training.engine.optimizers import selection as sel

DRAWS = 20000


def _frequencies(draw, n: int) -> np.ndarray:
    counts = Counter(draw() for _ in range(DRAWS))
    return np.array([counts[i] / DRAWS for i in range(n)])


def test_softmax_selection_matches_exp_reward_over_temperature():
    rewards = [0.2, 0.5, 0.9]
    expected = np.exp(np.array(rewards) / 0.3)
    expected /= expected.sum()
    rng = random.Random(1)
    freq = _frequencies(lambda: sel.select_index(rewards, "softmax", 0.3, rng), 3)
    np.testing.assert_allclose(freq, expected, atol=0.015)
    # a lower temperature is greedier
    sharp = sel.selection_probabilities(rewards, "softmax", 0.1)
    assert sharp[2] > expected[2] > 1 / 3


def test_best_is_greedy_and_random_is_uniform():
    rewards = [0.4, 0.9, 0.9, 0.1]
    rng = random.Random(2)
    assert {sel.select_index(rewards, "best", 0.3, rng) for _ in range(200)} == {1}  # first max
    freq = _frequencies(lambda: sel.select_index(rewards, "random", 0.3, rng), 4)
    np.testing.assert_allclose(freq, [0.25] * 4, atol=0.015)


def test_pairs_are_distinct():
    rng = random.Random(3)
    for _ in range(500):
        a, b = sel.select_indices([0.1, 0.2, 0.3], 2, "softmax", 0.3, rng)
        assert a != b
    assert sel.select_indices([0.1, 0.9, 0.5], 2, "best", 0.3, rng) == [1, 2]


def test_crossover_schedule_is_merging_rate_times_epoch():
    assert sel.crossover_probability(0.02, 0) == 0.0
    assert sel.crossover_probability(0.02, 5) == pytest.approx(0.10)
    assert sel.crossover_probability(0.02, 10) == pytest.approx(0.20)
    assert sel.crossover_probability(0.3, 7) == 1.0  # capped


def test_variable_selection_prefers_the_worst_variable():
    averages = [1.0, 0.0, 0.5]
    weights = np.exp(-np.array(averages))
    expected = weights / weights.sum()
    np.testing.assert_allclose(sel.variable_probabilities(averages), expected)
    rng = random.Random(4)
    freq = _frequencies(lambda: sel.select_variable(averages, rng), 3)
    np.testing.assert_allclose(freq, expected, atol=0.015)
    assert freq[1] > freq[2] > freq[0]


def test_example_sampling_counts_and_temperature():
    pool = [{"inputs": {"q": str(i)}, "outputs": {"a": str(i)}} for i in range(6)]
    weights = [0, 0, 0, 0, 0, 1.0]  # only the last input was hard
    rng = random.Random(5)
    sizes, hard = Counter(), 0
    for _ in range(4000):
        chosen = sel.sample_examples(pool, weights, 1, 3, 0.3, rng)
        sizes[len(chosen)] += 1
        assert len({e["inputs"]["q"] for e in chosen}) == len(chosen)
        hard += pool[5] in chosen
    assert set(sizes) == {1, 2, 3}
    assert all(abs(count / 4000 - 1 / 3) < 0.03 for count in sizes.values())
    # P(hard one first) = e^(1/0.3) / (e^(1/0.3) + 5) ≈ 0.84, so it is in most samples
    first = math.exp(1 / 0.3) / (math.exp(1 / 0.3) + 5)
    assert hard / 4000 > first
    assert sel.sample_examples(pool[:2], [0, 0], 3, 5, 0.3, rng).__len__() == 2
    assert sel.sample_examples([], [], 1, 3, 0.3, rng) == []


def test_zero_temperature_is_refused():
    with pytest.raises(ValueError, match="> 0"):
        sel.softmax([1.0, 2.0], 0.0)
    with pytest.raises(ValueError, match="selection must be one of"):
        sel.selection_probabilities([1.0], "tournament", 0.3)
