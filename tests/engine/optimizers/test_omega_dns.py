"""DNS competition on hand-made candidates and distances: the kept set is exactly right."""

import numpy as np
import pytest

from training.engine.optimizers import dns

REWARDS = [0.9, 0.8, 0.8, 0.5, 0.4, 0.3]


def _distances() -> np.ndarray:
    """Symmetric distances; only candidate→fitter entries matter for the scores."""
    d = np.full((6, 6), 0.5)
    np.fill_diagonal(d, 0.0)
    pairs = {
        (1, 0): 0.1,  # c1 is a near copy of the best → redundant
        (2, 0): 0.6,  # c2 is as good as c1 but different from the best → novel
        (3, 0): 0.7,
        (3, 1): 0.2,
        (3, 2): 0.9,
        (4, 0): 0.8,
        (4, 1): 0.8,
        (4, 2): 0.05,
        (4, 3): 0.9,
        (5, 0): 0.5,
        (5, 1): 0.5,
        (5, 2): 0.5,
        (5, 3): 0.5,
        (5, 4): 0.5,
        (1, 2): 0.33,  # equal rewards: never read
    }
    for (i, j), value in pairs.items():
        d[i, j] = d[j, i] = value
    return d


def test_scores_follow_the_guide_rule_k2():
    scores = dns.dominated_novelty_scores(REWARDS, _distances(), k_nearest_fitter=2)
    # c0: nothing fitter → 1.0; c1/c2: only c0 is fitter; c3: mean(0.2, 0.7);
    # c4: mean(0.05, 0.8); c5: mean of its two nearest fitter = 0.5
    np.testing.assert_allclose(scores, [1.0, 0.1, 0.6, 0.45, 0.425, 0.5])


def test_kept_set_is_above_median_then_top_by_reward():
    kept, scores = dns.dns_select(REWARDS, _distances(), k_nearest_fitter=2, population_size=10)
    assert np.median(scores) == pytest.approx(0.475)
    assert kept == [0, 2, 5]  # c1 (redundant copy of the best) is dropped though its reward is 0.8
    kept, _ = dns.dns_select(REWARDS, _distances(), k_nearest_fitter=2, population_size=2)
    assert kept == [0, 2]


def test_k1_uses_only_the_nearest_fitter():
    scores = dns.dominated_novelty_scores(REWARDS, _distances(), k_nearest_fitter=1)
    np.testing.assert_allclose(scores, [1.0, 0.1, 0.6, 0.2, 0.05, 0.5])
    assert dns.competition(REWARDS, scores, 10) == [0, 2, 5]


def test_k_larger_than_the_fitter_set_averages_what_exists():
    scores = dns.dominated_novelty_scores(REWARDS, _distances(), k_nearest_fitter=50)
    assert scores[1] == pytest.approx(0.1)
    assert scores[3] == pytest.approx((0.7 + 0.2 + 0.9) / 3)


def test_undominated_candidates_all_stay_even_at_the_median():
    rewards = [0.5, 0.5, 0.5, 0.5]
    d = np.full((4, 4), np.nan)  # nothing is fitter: no distance may be read
    kept, scores = dns.dns_select(rewards, d, k_nearest_fitter=3, population_size=10)
    assert scores.tolist() == [1.0] * 4
    assert kept == [0, 1, 2, 3]
    kept, _ = dns.dns_select(rewards, d, k_nearest_fitter=3, population_size=2)
    assert kept == [0, 1]  # ties on reward and score: the earliest


def test_single_and_empty_populations():
    kept, scores = dns.dns_select([0.3], np.zeros((1, 1)), 5, 10)
    assert kept == [0] and scores.tolist() == [1.0]
    assert dns.competition([], [], 3) == []


def test_ga_elitism_ignores_novelty():
    assert dns.elitism(REWARDS, 3) == [0, 1, 2]


def test_cosine_distance_matrix_matches_pairwise_formula():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(7, 5))
    vectors[3] = 0.0  # a zero vector: distance 1 to everything else
    d = dns.cosine_distance_matrix(vectors)
    for i in range(7):
        for j in range(7):
            if i == j:
                assert d[i, j] == 0.0
            elif 3 in (i, j):
                assert d[i, j] == pytest.approx(1.0)
            else:
                a, b = vectors[i], vectors[j]
                expected = 1 - a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
                assert d[i, j] == pytest.approx(expected)
    assert np.allclose(d, d.T)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="3x3"):
        dns.dominated_novelty_scores([1, 2, 3], np.zeros((2, 2)), 1)
    with pytest.raises(ValueError, match="k_nearest_fitter"):
        dns.dominated_novelty_scores([1, 2], np.zeros((2, 2)), 0)
    with pytest.raises(ValueError, match="population_size"):
        dns.competition([1.0], [1.0], 0)
