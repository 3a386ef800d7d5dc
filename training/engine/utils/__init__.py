"""Plot utilities (matplotlib, Agg backend, PNG files) for training runs and evaluations.

``utils.summary.program_summary`` builds the text of ``Program.summary()``.
"""

from training.engine.utils.plot_history import plot_history
from training.engine.utils.plot_metrics import (
    plot_metrics_comparison_with_mean_and_std,
    plot_metrics_with_mean_and_std,
)

__all__ = [
    "plot_history",
    "plot_metrics_comparison_with_mean_and_std",
    "plot_metrics_with_mean_and_std",
]
