"""Bar charts of evaluation results over several runs: mean bars, std error bars."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from training.engine.utils.plotting import (
    color,
    new_figure,
    output_path,
    results_table,
    save,
    score_axis,
)


def _stats(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single run)."""
    mean = float(np.mean(values))
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return mean, std


def _label_bars(axes, bars, means: list[float], stds: list[float]) -> None:
    for bar, mean, std in zip(bars, means, stds, strict=True):
        text = f"{mean:.2f}" if std == 0 else f"{mean:.2f}\n±{std:.2f}"
        axes.annotate(
            text,
            (bar.get_x() + bar.get_width() / 2, mean + std),
            textcoords="offset points",
            xytext=(0, 3),
            ha="center",
            va="bottom",
            fontsize=9,
        )


def plot_metrics_with_mean_and_std(
    results: Any,
    to_folder: str | None = None,
    title: str = "Evaluation metrics",
    to_file: str = "evaluation_metrics_with_mean_and_std.png",
    xlabel: str = "Metric",
    ylabel: str = "Score (mean ± std)",
) -> str:
    """One bar per metric: the mean over ``results`` (a list of ``evaluate`` dicts).

    Error bars are the sample standard deviation across runs; each bar is labelled
    with its mean and std. Returns the PNG path.
    """
    names, table = results_table(results, "plot_metrics_with_mean_and_std(results)")
    stats = [_stats(table[name]) for name in names]
    means = [mean for mean, _ in stats]
    stds = [std for _, std in stats]
    runs = len(next(iter(table.values())))

    figure = new_figure(max(6.0, 1.3 * len(names) + 2.5), 4.8)
    axes = figure.add_subplot(1, 1, 1)
    positions = np.arange(len(names))
    bars = axes.bar(
        positions,
        means,
        yerr=stds,
        capsize=6,
        color=[color(i) for i in range(len(names))],
        edgecolor="black",
        linewidth=0.6,
    )
    _label_bars(axes, bars, means, stds)
    axes.set_xticks(positions, names, rotation=20 if len(names) > 4 else 0)
    axes.set_title(f"{title}\n(n = {runs} run{'s' if runs != 1 else ''})", fontsize=13)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    score_axis(axes, [m + s for m, s in stats] + [m - s for m, s in stats], extra_headroom=0.1)
    axes.grid(True, axis="y", alpha=0.3)
    return save(figure, output_path(to_folder, to_file))


def plot_metrics_comparison_with_mean_and_std(
    comparison: Any,
    to_folder: str | None = None,
    title: str = "Metrics comparison",
    to_file: str = "evaluation_metrics_comparison_with_mean_and_std.png",
    xlabel: str = "Metric",
    ylabel: str = "Score (mean ± std)",
) -> str:
    """Grouped bars: for each metric, one bar per condition (e.g. before/after training).

    ``comparison`` maps a condition name to a list of ``evaluate`` dicts (or a
    single dict). Every condition must report the same metrics. Returns the PNG path.
    """
    if not isinstance(comparison, Mapping) or not comparison:
        raise ValueError(
            "plot_metrics_comparison_with_mean_and_std(comparison) must be a non-empty dict "
            "like {'before_training': [results...], 'after_training': [results...]}"
        )
    conditions = list(comparison)
    tables: dict[str, dict[str, list[float]]] = {}
    names: list[str] | None = None
    for condition in conditions:
        where = f"comparison[{condition!r}]"
        condition_names, tables[condition] = results_table(comparison[condition], where)
        if names is None:
            names = condition_names
        elif set(condition_names) != set(names):
            raise ValueError(
                f"{where} reports {condition_names} but {conditions[0]!r} reports {names}; "
                "every condition must report the same metrics"
            )
    assert names is not None

    width = 0.8 / len(conditions)
    positions = np.arange(len(names))
    figure = new_figure(max(6.5, 1.2 * len(names) * len(conditions) + 2.5), 5.0)
    axes = figure.add_subplot(1, 1, 1)
    tops: list[float] = []
    for index, condition in enumerate(conditions):
        stats = [_stats(tables[condition][name]) for name in names]
        means = [mean for mean, _ in stats]
        stds = [std for _, std in stats]
        runs = len(tables[condition][names[0]])
        offsets = positions + (index - (len(conditions) - 1) / 2) * width
        bars = axes.bar(
            offsets,
            means,
            width,
            yerr=stds,
            capsize=5,
            color=color(index),
            edgecolor="black",
            linewidth=0.6,
            label=f"{condition.replace('_', ' ')} (n = {runs})",
        )
        _label_bars(axes, bars, means, stds)
        tops.extend([m + s for m, s in stats] + [m - s for m, s in stats])
    axes.set_xticks(positions, names, rotation=20 if len(names) > 4 else 0)
    axes.set_title(title, fontsize=13)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    score_axis(axes, tops, extra_headroom=0.15)
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend(loc="upper left", fontsize=9, ncols=min(len(conditions), 3))
    return save(figure, output_path(to_folder, to_file))
