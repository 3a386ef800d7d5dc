"""Plot utilities (matplotlib, Agg backend, PNG files) for training runs and evaluations,
the paired bootstrap statistic the dashboard shows beside them, and the PCA projection of
candidate embeddings its population map draws (``projection.py``).

``utils.summary.program_summary`` builds the text of ``Program.summary()``.
"""

from training.engine.utils.paired_bootstrap import PairedBootstrap, paired_bootstrap
from training.engine.utils.plot_bootstrap import plot_reward_difference_with_bootstrap
from training.engine.utils.plot_history import plot_history
from training.engine.utils.plot_metrics import (
    plot_metrics_comparison_with_mean_and_std,
    plot_metrics_with_mean_and_std,
)
from training.engine.utils.projection import compact_embedding, pca_2d

__all__ = [
    "PairedBootstrap",
    "compact_embedding",
    "pca_2d",
    "paired_bootstrap",
    "plot_history",
    "plot_metrics_comparison_with_mean_and_std",
    "plot_metrics_with_mean_and_std",
    "plot_reward_difference_with_bootstrap",
]
