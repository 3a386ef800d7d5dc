"""Metrics: monitored during training and evaluation, never optimised.

``synalinks.metrics.F1Score(in_mask=["answer"])``, ``Precision``, ``Recall`` and
``MeanMetricWrapper(fn=...)``; see ``docs/ARCHITECTURE.md`` for the shared
``Metric`` interface.
"""

from training.engine.metrics.mean_metric_wrapper import MeanMetricWrapper
from training.engine.metrics.metric import Metric
from training.engine.metrics.token_overlap import F1Score, Precision, Recall
from training.engine.saving import deserialize


def get(identifier):
    """A Metric from an instance, a registered name/config, or a registered function."""
    if identifier is None or isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        return deserialize({"class_name": identifier, "config": {}})
    if callable(identifier):
        return MeanMetricWrapper(fn=identifier)
    raise ValueError(f"Cannot interpret {identifier!r} as a metric")


__all__ = ["F1Score", "MeanMetricWrapper", "Metric", "Precision", "Recall", "get"]
