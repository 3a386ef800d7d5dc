"""Token-overlap metrics (SQuAD style): ``F1Score``, ``Precision``, ``Recall``.

For each sample and each compared field, the normalised tokens of the
prediction are matched against those of the ground truth as multisets
(repeated tokens count as often as they appear in both). Precision is
``common / predicted tokens``, recall ``common / true tokens``, F1 their
harmonic mean. The sample's score is the mean over the ground truth's
(masked) fields; the metric is the mean over samples. When a field is empty
on both sides it scores 1.0, when it is empty on one side only it scores 0.0.
"""

from __future__ import annotations

from collections import Counter

from training.engine.masking import MaskedDataModel
from training.engine.metrics.metric import Metric
from training.engine.metrics.text_normalization import tokenize
from training.engine.saving import register_synalinks_serializable

__all__ = ["F1Score", "Precision", "Recall", "TokenOverlapMetric", "overlap_counts"]


def overlap_counts(true_value, pred_value) -> tuple[int, int, int]:
    """(common tokens, predicted tokens, true tokens) of two field values."""
    true_tokens = tokenize(true_value)
    pred_tokens = tokenize(pred_value)
    common = sum((Counter(true_tokens) & Counter(pred_tokens)).values())
    return common, len(pred_tokens), len(true_tokens)


class TokenOverlapMetric(Metric):
    """Shared per-field loop; subclasses turn the counts into a score.

    Args:
        in_mask: the only fields compared (None: every field of the ground truth).
        out_mask: fields left out of the comparison (``["thinking"]``: not the reasoning).
        name: the name in logs and history (None: the class name in snake_case).
    """

    def __init__(self, in_mask=None, out_mask=None, name=None):
        super().__init__(name=name, in_mask=in_mask, out_mask=out_mask)

    @staticmethod
    def field_score(common: int, n_pred: int, n_true: int) -> float:
        raise NotImplementedError

    async def score(self, y_true: MaskedDataModel | None, y_pred: MaskedDataModel) -> float:
        if y_true is None:
            raise ValueError(f"{self.where} needs a ground truth, but y_true is None")
        fields = list(y_true) or list(y_pred)
        if not fields:
            return 1.0
        scores = []
        for field in fields:
            common, n_pred, n_true = overlap_counts(y_true.get(field), y_pred.get(field))
            if n_pred == 0 or n_true == 0:
                scores.append(1.0 if n_pred == n_true else 0.0)
            else:
                scores.append(self.field_score(common, n_pred, n_true))
        return sum(scores) / len(scores)


@register_synalinks_serializable(package="synalinks")
class Precision(TokenOverlapMetric):
    """Share of predicted tokens that are in the ground truth."""

    @staticmethod
    def field_score(common: int, n_pred: int, n_true: int) -> float:
        return common / n_pred


@register_synalinks_serializable(package="synalinks")
class Recall(TokenOverlapMetric):
    """Share of ground-truth tokens that the prediction contains."""

    @staticmethod
    def field_score(common: int, n_pred: int, n_true: int) -> float:
        return common / n_true


@register_synalinks_serializable(package="synalinks")
class F1Score(TokenOverlapMetric):
    """Harmonic mean of token precision and recall (the SQuAD F1)."""

    @staticmethod
    def field_score(common: int, n_pred: int, n_true: int) -> float:
        if common == 0:
            return 0.0
        precision = common / n_pred
        recall = common / n_true
        return 2 * precision * recall / (precision + recall)
