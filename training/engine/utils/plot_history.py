"""``plot_history``: reward and metrics per epoch, training next to validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from training.engine.utils.plotting import (
    color,
    finite_number,
    new_figure,
    output_path,
    save,
    score_axis,
    value_label,
)


def history_dict(history: Any) -> dict[str, list[float]]:
    """The ``{"reward": [...], "val_reward": [...]}`` dict of a History or a plain dict."""
    data = getattr(history, "history", history)
    if not isinstance(data, Mapping):
        raise TypeError(
            "plot_history expects a History (from fit) or a dict like "
            f"{{'reward': [...], 'val_reward': [...]}}, got {type(history).__name__}"
        )
    result: dict[str, list[float]] = {}
    for key, values in data.items():
        if isinstance(values, str) or not hasattr(values, "__iter__"):
            raise TypeError(f"plot_history: history[{key!r}] must be a list of per-epoch values")
        result[str(key)] = [
            finite_number(v, f"history[{key!r}][{i}]") if v is not None else float("nan")
            for i, v in enumerate(values)
        ]
    if not any(result.values()):
        raise ValueError("plot_history: the history is empty (no epoch was recorded)")
    return result


def _groups(data: dict[str, list[float]]) -> list[str]:
    """Base metric names, ``reward`` first, each plotted with its ``val_`` twin."""
    bases: list[str] = []
    for key in data:
        base = key[4:] if key.startswith("val_") else key
        if base not in bases:
            bases.append(base)
    return sorted(bases, key=lambda name: (name != "reward", bases.index(name)))


def plot_history(
    history: Any,
    to_folder: str | None = None,
    to_file: str = "training_history.png",
    title: str = "Training history",
    xlabel: str = "Epoch",
    metrics_filter: list[str] | None = None,
) -> str:
    """Plot one panel per quantity (reward first, then each metric) and return the PNG path.

    Each panel shows the training curve (solid) and the validation curve
    (dashed, ``val_`` prefix) with the last value labelled, so the end state of
    a run is readable without hovering.
    """
    from matplotlib.ticker import MaxNLocator

    data = history_dict(history)
    groups = _groups(data)
    if metrics_filter is not None:
        unknown = [name for name in metrics_filter if name not in groups]
        if unknown:
            raise ValueError(f"plot_history: unknown metrics {unknown}; available: {groups}")
        groups = [name for name in groups if name in metrics_filter]

    columns = min(len(groups), 2)
    rows = (len(groups) + columns - 1) // columns
    figure = new_figure(6.0 * columns, 4.0 * rows)
    figure.suptitle(title, fontsize=14, fontweight="bold")
    for index, base in enumerate(groups):
        axes = figure.add_subplot(rows, columns, index + 1)
        plotted = [v for key in (base, f"val_{base}") for v in data.get(key, []) if v == v]
        is_score = all(0.0 <= v <= 1.0 for v in plotted)
        for series, (key, style, label) in enumerate(
            [(base, "-", "training"), (f"val_{base}", "--", "validation")]
        ):
            values = data.get(key)
            if not values:
                continue
            epochs = list(range(1, len(values) + 1))
            axes.plot(
                epochs,
                values,
                linestyle=style,
                marker="o",
                color=color(series),
                label=f"{label} ({key})",
            )
            last = values[-1]
            if last == last:  # not NaN
                axes.annotate(
                    value_label(last, is_score),
                    (epochs[-1], last),
                    textcoords="offset points",
                    xytext=(6, 4 if series == 0 else -12),
                    fontsize=9,
                    color=color(series),
                )
        axes.set_title(base.replace("_", " "))
        axes.set_xlabel(xlabel)
        axes.set_ylabel(base)
        score_axis(axes, plotted)
        longest = max(len(data.get(base, [])), len(data.get(f"val_{base}", [])), 1)
        axes.set_xlim(0.5, longest + 0.5)
        if longest <= 20:
            axes.set_xticks(range(1, longest + 1))
        else:
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(True, alpha=0.3)
        axes.legend(loc="best", fontsize=9)
    return save(figure, output_path(to_folder, to_file))
