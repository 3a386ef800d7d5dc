"""Before/after mean rewards with the paired bootstrap interval of their difference."""

from __future__ import annotations

from typing import Any

from training.engine.utils.paired_bootstrap import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    paired_bootstrap,
)
from training.engine.utils.plotting import color, new_figure, output_path, save, score_axis


def plot_reward_difference_with_bootstrap(
    before: Any,
    after: Any,
    to_folder: str | None = None,
    title: str = "Test reward before / after training",
    to_file: str = "reward_difference_with_bootstrap.png",
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> str:
    """Sibling of ``plot_metrics_with_mean_and_std`` for per-example rewards.

    Left: the mean reward before and after training. Right: the difference ``after -
    before`` with its paired bootstrap interval (:func:`paired_bootstrap`) and a zero line; the
    caption says the interval and whether the difference is within noise.

    Args:
        before: one reward per test example before training.
        after: the same examples' rewards after training.
        confidence, resamples, seed: passed to :func:`paired_bootstrap`.

    Returns:
        The PNG path.

    Example:
        >>> plot_reward_difference_with_bootstrap([0, 1, 0], [1, 1, 0], to_folder="plots")
        'plots/reward_difference_with_bootstrap.png'
    """
    result = paired_bootstrap(before, after, confidence, resamples, seed)
    before_mean = sum(float(v) for v in before) / result.n
    after_mean = before_mean + result.difference

    figure = new_figure(8.0, 4.6)
    means_axes, diff_axes = figure.subplots(1, 2, width_ratios=[2, 1])
    bars = means_axes.bar(
        [0, 1],
        [before_mean, after_mean],
        color=[color(0), color(1)],
        edgecolor="black",
        linewidth=0.6,
    )
    for bar, value in zip(bars, (before_mean, after_mean), strict=True):
        means_axes.annotate(
            f"{value:.3f}",
            (bar.get_x() + bar.get_width() / 2, value),
            textcoords="offset points",
            xytext=(0, 3),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    means_axes.set_xticks([0, 1], ["before training", "after training"])
    means_axes.set_ylabel(f"Mean reward (n = {result.n} examples)")
    score_axis(means_axes, [before_mean, after_mean], extra_headroom=0.1)
    means_axes.grid(True, axis="y", alpha=0.3)

    verdict_color = "#666666" if result.within_noise else color(2)
    diff_axes.axhline(0.0, color="black", linewidth=0.8)
    diff_axes.errorbar(
        [0],
        [result.difference],
        yerr=[[result.difference - result.low], [result.high - result.difference]],
        fmt="o",
        color=verdict_color,
        capsize=8,
        markersize=7,
    )
    diff_axes.set_xticks([0], ["after − before"])
    diff_axes.set_xlim(-1, 1)
    span = max(abs(result.low), abs(result.high), 0.05)
    diff_axes.set_ylim(-1.25 * span, 1.25 * span)
    diff_axes.set_ylabel(f"Difference ({result.confidence:.0%} CI)")
    diff_axes.grid(True, axis="y", alpha=0.3)

    figure.suptitle(title, fontsize=13)
    figure.supxlabel(
        f"Difference {result.describe()}; {result.resamples} resamples, seed {result.seed}",
        fontsize=9,
    )
    return save(figure, output_path(to_folder, to_file))
