"""Metrics: monitored during training and evaluation, never optimised.

``synalinks.metrics.F1Score(in_mask=["answer"])``, ``Precision``, ``Recall`` and
``MeanMetricWrapper(fn=...)``; see ``docs/ARCHITECTURE.md`` for the shared
``Metric`` interface.
"""

from training.engine.metrics.mean_metric_wrapper import MeanMetricWrapper
from training.engine.metrics.metric import Metric
from training.engine.metrics.token_overlap import F1Score, Precision, Recall
from training.engine.scoring import get_scorer


def get(identifier):
    """A Metric from an instance, a registered name/config, or a registered function."""
    return get_scorer(identifier, Metric, MeanMetricWrapper)


__all__ = ["F1Score", "MeanMetricWrapper", "Metric", "Precision", "Recall", "get"]
