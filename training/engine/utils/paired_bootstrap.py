"""Paired bootstrap confidence interval of a difference of mean rewards.

Why not mean ± std across evaluations: at temperature 0 (with the cache), evaluating the same
program twice gives the same answers, so the std across evaluations is 0 and says nothing about
whether "after" really beats "before". What varies is *which examples* the test split holds.
The paired bootstrap answers that: resample the test examples with replacement (the same
examples for both sides, since each example is scored before and after), take the mean of
``after - before`` on each resample, and read the interval off the resampled means.

The computation is seeded, so the dashboard and a script given the same rewards get the same
figure. Numpy only (no Django, no plotting).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from training.engine.utils.plotting import finite_number

__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "TYPICAL_DISCORDANCE",
    "PairedBootstrap",
    "detectable_gain",
    "paired_bootstrap",
    "rows_to_detect",
]

#: The share of examples on which a trained program's reward differs from its seed's, taken
#: when sizing a split before any run (measured: bench/learning.py's fits that replaced their
#: seed differed on this share of test rows, averaged over four label tasks).
TYPICAL_DISCORDANCE = 0.3
#: The normal quantile of the two-sided 95% interval the pages draw.
_Z95 = 1.96


def detectable_gain(rows: int, discordance: float = TYPICAL_DISCORDANCE) -> float | None:
    """The smallest difference of mean 0/1 reward that a paired 95% interval over ``rows``
    examples tells from noise, when the two programs differ on ``discordance`` of them
    (about ``1.96 × sqrt(discordance / rows)``); None without rows.

    Example:
        >>> round(detectable_gain(24), 2), round(detectable_gain(150), 2)
        (0.22, 0.09)
    """
    if rows <= 0:
        return None
    return _Z95 * (discordance / rows) ** 0.5


def rows_to_detect(gain: float, discordance: float = TYPICAL_DISCORDANCE) -> int:
    """The examples a split needs for :func:`detectable_gain` to reach ``gain``.

    Example:
        >>> rows_to_detect(0.10)
        116
    """
    return int(-(-discordance * (_Z95 / gain) ** 2 // 1))


DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
# Resampled index matrices are drawn in blocks of about this many entries (bounded memory).
_BLOCK_ENTRIES = 1_000_000


@dataclass(frozen=True)
class PairedBootstrap:
    """The result of :func:`paired_bootstrap`.

    Attributes:
        difference: the observed mean of ``after - before`` over the examples.
        low, high: the bounds of the percentile confidence interval of that mean.
        confidence: the interval's level (e.g. ``0.95``).
        n: how many paired examples.
        resamples, seed: how it was computed (same inputs + same seed = same interval).
    """

    difference: float
    low: float
    high: float
    confidence: float
    n: int
    resamples: int
    seed: int

    @property
    def within_noise(self) -> bool:
        """True when the interval includes 0: the data do not show a difference."""
        return self.low <= 0.0 <= self.high

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields plus ``within_noise``."""
        return {**asdict(self), "within_noise": self.within_noise}

    def describe(self, digits: int = 3) -> str:
        """``+0.138 (95% CI -0.020 to +0.290, paired bootstrap, n=40): within noise``."""
        verdict = "within noise" if self.within_noise else "beyond noise"
        return (
            f"{self.difference:+.{digits}f} ({self.confidence:.0%} CI {self.low:+.{digits}f} "
            f"to {self.high:+.{digits}f}, paired bootstrap, n={self.n}): {verdict}"
        )


def _rewards(values: Any, where: str) -> np.ndarray:
    if isinstance(values, str | bytes) or not hasattr(values, "__len__"):
        raise TypeError(f"{where} must be a list of per-example rewards, got {values!r:.60}")
    return np.array(
        [finite_number(value, f"{where}[{index}]") for index, value in enumerate(values)],
        dtype=float,
    )


def paired_bootstrap(
    before: Any,
    after: Any,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> PairedBootstrap:
    """Percentile bootstrap interval of ``mean(after - before)`` over paired examples.

    Args:
        before: one reward per test example before training.
        after: the same examples' rewards after training (same order, same length).
        confidence: the interval's level, in (0, 1).
        resamples: how many resamples of the examples (with replacement).
        seed: seeds numpy's generator: the same inputs and seed give the same interval.

    Returns:
        A :class:`PairedBootstrap` (``difference``, ``low``, ``high``, ``within_noise``...).

    Example:
        >>> result = paired_bootstrap([0, 0, 0, 0, 0], [1, 1, 1, 1, 0])
        >>> round(result.difference, 2), round(result.low, 2), round(result.high, 2)
        (0.8, 0.4, 1.0)
        >>> result.within_noise
        False
    """
    before_values = _rewards(before, "before")
    after_values = _rewards(after, "after")
    if len(before_values) != len(after_values):
        raise ValueError(
            f"paired_bootstrap needs one 'before' and one 'after' reward per example; got "
            f"{len(before_values)} before and {len(after_values)} after"
        )
    if not len(before_values):
        raise ValueError("paired_bootstrap needs at least one example")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")

    differences = after_values - before_values
    count = len(differences)
    generator = np.random.default_rng(seed)
    block = max(1, _BLOCK_ENTRIES // count)
    means = np.empty(resamples, dtype=float)
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        indices = generator.integers(0, count, size=(size, count))
        means[start : start + size] = differences[indices].mean(axis=1)
    tail = (1.0 - float(confidence)) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return PairedBootstrap(
        difference=float(differences.mean()),
        low=float(low),
        high=float(high),
        confidence=float(confidence),
        n=count,
        resamples=resamples,
        seed=int(seed),
    )
