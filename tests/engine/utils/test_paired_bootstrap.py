"""The paired bootstrap interval of a test-reward difference.

The hand-computed cases use the exact bootstrap distribution of a mean of n draws:
with differences ``[1, 1, 1, 1, 0]`` the number of zero draws Z out of 5 is Binomial(5, 1/5),
so P(mean <= 0.2) = P(Z >= 4) = 0.0067 < 0.025 < P(mean <= 0.4) = P(Z >= 3) = 0.058:
the 2.5 % percentile is 0.4, and P(mean = 1) = 0.8**5 = 0.33 > 0.025 puts the 97.5 % one at 1.
"""

import pytest

import training.engine as synalinks
from tests.engine.utils.test_plots import assert_png
from training.engine.utils import paired_bootstrap


def test_interval_matches_the_hand_computed_bootstrap_distribution():
    result = paired_bootstrap([0, 0, 0, 0, 0], [1, 1, 1, 1, 0], seed=3)
    assert result.difference == pytest.approx(0.8)
    assert result.low == pytest.approx(0.4)
    assert result.high == pytest.approx(1.0)
    assert result.n == 5 and result.confidence == 0.95
    assert not result.within_noise


def test_an_interval_that_includes_zero_is_within_noise():
    # differences [0, 0, 1]: P(mean = 0) = (2/3)**3 = 0.30 > 0.025 and
    # P(mean = 1) = (1/3)**3 = 0.037 > 0.025, so the interval is [0, 1].
    result = paired_bootstrap([1, 0, 0], [1, 0, 1])
    assert result.difference == pytest.approx(1 / 3)
    assert (result.low, result.high) == (pytest.approx(0.0), pytest.approx(1.0))
    assert result.within_noise
    assert result.describe() == (
        "+0.333 (95% CI +0.000 to +1.000, paired bootstrap, n=3): within noise"
    )


def test_identical_rewards_give_a_zero_width_interval_at_zero():
    result = paired_bootstrap([0.5, 1.0, 0.0], [0.5, 1.0, 0.0])
    assert (result.difference, result.low, result.high) == (0.0, 0.0, 0.0)
    assert result.within_noise


def test_same_seed_same_interval_and_the_seed_matters():
    before = [0.1 * (i % 7) for i in range(60)]
    after = [min(1.0, b + 0.05 * (i % 3)) for i, b in enumerate(before)]
    first = paired_bootstrap(before, after, seed=11)
    assert paired_bootstrap(before, after, seed=11) == first
    assert paired_bootstrap(before, after, seed=12) != first
    assert first.low < first.difference < first.high


def test_bad_input_says_what_is_wrong():
    with pytest.raises(ValueError, match="3 before and 2 after"):
        paired_bootstrap([0, 1, 0], [1, 1])
    with pytest.raises(ValueError, match="at least one example"):
        paired_bootstrap([], [])
    with pytest.raises(TypeError, match=r"after\[1\]"):
        paired_bootstrap([0, 1], [1, "x"])
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap([0], [1], confidence=95)


def test_plot_reward_difference_with_bootstrap_writes_a_png(tmp_path):
    path = synalinks.utils.plot_reward_difference_with_bootstrap(
        [0, 0, 1, 0, 1, 0], [1, 0, 1, 1, 1, 0], to_folder=str(tmp_path), to_file="diff"
    )
    assert path == str(tmp_path / "diff.png")
    assert_png(path)
