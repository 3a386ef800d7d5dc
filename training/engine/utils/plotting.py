"""Shared plumbing for the plot utilities: headless figures, file paths, input checks.

We draw with ``matplotlib.figure.Figure`` and the Agg canvas directly instead of
``pyplot``: no global state, no GUI backend, safe in Celery workers and threads.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

# A colour-blind-friendly palette (Okabe–Ito), cycled when more series are needed.
PALETTE = [
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
]


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def new_figure(width: float, height: float):
    """A Figure attached to an Agg canvas (no pyplot, no display needed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def output_path(to_folder: str | os.PathLike | None, to_file: str | os.PathLike) -> str:
    """``to_folder/to_file`` (folder created), ``.png`` added when the name has no suffix."""
    to_file = os.fspath(to_file)
    if not to_file:
        raise ValueError("to_file must be a non-empty file name")
    if not os.path.splitext(to_file)[1]:
        to_file += ".png"
    path = os.path.join(os.fspath(to_folder), to_file) if to_folder else to_file
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    return path


def save(figure, path: str) -> str:
    """Write ``figure`` as a PNG whose ``Description`` text chunk holds every word drawn on it
    (titles, axis labels, tick and legend labels, one a line): what a screen reader or a
    test reads of the picture without looking at it."""
    from matplotlib.text import Text

    words = [text.get_text() for text in figure.findobj(Text) if text.get_text().strip()]
    figure.savefig(
        path,
        format="png",
        dpi=120,
        bbox_inches="tight",
        metadata={"Description": "\n".join(words)},
    )
    return path


def finite_number(value: Any, where: str) -> float:
    """``value`` as a finite float, or an error naming where it came from."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where} must be a number, got {value!r:.60} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value}")
    return value


def results_table(results: Any, where: str) -> tuple[list[str], dict[str, list[float]]]:
    """Validate a list of evaluation dicts → (metric names in first-seen order, values per metric)."""
    if isinstance(results, Mapping):
        results = [results]
    if not isinstance(results, list | tuple) or not results:
        raise ValueError(f"{where} must be a non-empty list of evaluation dicts (one per run)")
    names: list[str] = []
    for run_index, run in enumerate(results):
        if not isinstance(run, Mapping):
            raise TypeError(
                f"{where}[{run_index}] must be a dict of metric values, got {run!r:.60}"
            )
        for name in run:
            if name not in names:
                names.append(name)
    table: dict[str, list[float]] = {name: [] for name in names}
    for run_index, run in enumerate(results):
        missing = [name for name in names if name not in run]
        if missing:
            raise ValueError(f"{where}[{run_index}] lacks {missing}; every run must report {names}")
        for name in names:
            table[name].append(finite_number(run[name], f"{where}[{run_index}][{name!r}]"))
    return names, table


def y_limits(values: list[float]) -> tuple[float, float]:
    """[0, 1] (with headroom for labels) when every value is a score, else fitted to the data."""
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if low >= 0.0 and high <= 1.0:
        return 0.0, 1.15
    span = (high - low) or abs(high) or 1.0
    return min(0.0, low - 0.1 * span), high + 0.15 * span


def score_axis(axes, values: list[float], extra_headroom: float = 0.0) -> None:
    """Set the y range (see :func:`y_limits`); for scores, tick only 0–1 so headroom reads as space."""
    low, high = y_limits(values)
    is_score = low == 0.0 and high == 1.15
    axes.set_ylim(low, high + (extra_headroom if is_score else 0.0))
    if is_score:
        axes.set_yticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])


def value_label(value: float, is_score: bool) -> str:
    """3 decimals for scores, 4 significant digits for anything else."""
    return f"{value:.3f}" if is_score else f"{value:.4g}"
