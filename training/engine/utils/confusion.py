"""Confusion matrix and per-class precision, recall and F1 for label targets.

A target field is a *label* when it takes few distinct values on the examples
(:func:`is_label`: between 2 and :data:`MAX_LABELS`, each seen on average at least twice):
then "which classes get confused with which" is worth a matrix. Rows are the expected labels,
columns the same labels, then the other predicted values (each of the
:data:`MAX_EXTRA_COLUMNS` most frequent its own column, the rest together in
:data:`OTHER`), then :data:`FAILED` (no prediction). Values are compared as text, so ``1``
and ``"1"`` are the same label.

Pure Python, no Django: the dashboard renders it and filters its per-example table with
:meth:`ConfusionMatrix.column_of`, so a cell and the rows it counts agree by construction.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FAILED",
    "MAX_LABELS",
    "OTHER",
    "ClassScores",
    "ConfusionMatrix",
    "confusion_matrix",
    "is_label",
    "label_text",
    "labels_of",
]

#: A target with more distinct values than this is not treated as a label.
MAX_LABELS = 12
#: Predicted values that are no expected label and get a column of their own.
MAX_EXTRA_COLUMNS = 3
#: The column of every other predicted value.
OTHER = "(other)"
#: The column of failed predictions (no output).
FAILED = "(failed)"
EMPTY = "(empty)"


def label_text(value: Any) -> str | None:
    """A value as the text it is compared by (None stays None: a failed prediction)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def labels_of(expected: list[Any]) -> list[str]:
    """The distinct expected values as text, most frequent first (ties: first seen)."""
    return [label for label, _ in Counter(label_text(v) or EMPTY for v in expected).most_common()]


def is_label(values: list[Any], max_labels: int = MAX_LABELS) -> bool:
    """Whether ``values`` (one field's expected values) look like labels.

    Args:
        values: the field's value on each example.
        max_labels: the most distinct values a label field takes.

    Returns:
        True when there are 2 to ``max_labels`` distinct scalar values, each seen twice on
        average (a free-text answer that happens to repeat is not a label).

    Example:
        >>> is_label(["bug", "box", "bug", "money", "box", "bug"])
        True
    """
    if not values or any(isinstance(v, dict | list) or v is None for v in values):
        return False
    distinct = len({label_text(v) for v in values})
    return 2 <= distinct <= max_labels and distinct * 2 <= len(values)


@dataclass(frozen=True)
class ClassScores:
    """One expected label's figures (None where undefined: nothing predicted as it)."""

    label: str
    precision: float | None
    recall: float | None
    f1: float | None
    support: int


@dataclass(frozen=True)
class ConfusionMatrix:
    """The result of :func:`confusion_matrix`.

    Attributes:
        labels: the expected labels (rows), most frequent first.
        columns: the labels, then other predicted values, then ``OTHER``/``FAILED`` when used.
        counts: ``counts[row][column]`` examples.
        classes: per-label :class:`ClassScores`, in ``labels`` order.
        accuracy: the share of examples predicted as their label.
        macro_f1: the mean F1 over the labels (undefined F1 counts as 0).
        total: how many examples.
    """

    labels: list[str]
    columns: list[str]
    counts: list[list[int]]
    classes: list[ClassScores]
    accuracy: float
    macro_f1: float
    total: int

    def column_of(self, predicted: Any) -> str:
        """The column a predicted value is counted in (a failed prediction: ``FAILED``)."""
        text = label_text(predicted)
        if text is None:
            return FAILED
        shown = text if text != "" else EMPTY
        return shown if shown in self.columns and shown not in (OTHER, FAILED) else OTHER

    def row_of(self, expected: Any) -> str:
        return label_text(expected) or EMPTY


def confusion_matrix(
    expected: list[Any], predicted: list[Any], labels: list[str] | None = None
) -> ConfusionMatrix:
    """Count each (expected, predicted) pair and score each expected label.

    Args:
        expected: the expected value of each example.
        predicted: the predicted value of each example, None where the prediction failed.
        labels: the rows, in order (default: the expected values, most frequent first).

    Returns:
        A :class:`ConfusionMatrix`. Precision of a label = examples predicted as it that
        are it / examples predicted as it; recall = those / examples that are it.

    Example:
        >>> m = confusion_matrix(["a", "a", "b"], ["a", "b", None])
        >>> m.columns, m.counts
        (['a', 'b', '(failed)'], [[1, 1, 0], [0, 0, 1]])
        >>> m.classes[0].precision, m.classes[0].recall
        (1.0, 0.5)
    """
    if len(expected) != len(predicted):
        raise ValueError(f"{len(expected)} expected values but {len(predicted)} predictions")
    rows = [label_text(value) or EMPTY for value in expected]
    if labels is None:
        labels = labels_of(expected)
    shown = [label_text(value) for value in predicted]
    shown = [text if text != "" else EMPTY if text is not None else None for text in shown]
    extras = Counter(text for text in shown if text is not None and text not in labels)
    extra_columns = [value for value, _ in extras.most_common(MAX_EXTRA_COLUMNS)]
    if len(extras) > MAX_EXTRA_COLUMNS:
        extra_columns.append(OTHER)
    if any(text is None for text in shown):
        extra_columns.append(FAILED)
    columns = list(labels) + extra_columns
    position = {column: j for j, column in enumerate(columns)}
    counts = [[0] * len(columns) for _ in labels]
    row_position = {label: i for i, label in enumerate(labels)}
    for row, text in zip(rows, shown, strict=True):
        if row not in row_position:
            continue
        if text is None:
            column = FAILED
        elif text in position and text not in (OTHER, FAILED):
            column = text
        else:
            column = OTHER
        counts[row_position[row]][position[column]] += 1
    classes = []
    for i, label in enumerate(labels):
        hits = counts[i][i]
        support = sum(counts[i])
        predicted_as = sum(counts[r][i] for r in range(len(labels)))
        precision = hits / predicted_as if predicted_as else None
        recall = hits / support if support else None
        if precision is None or recall is None:
            f1 = None
        else:
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        classes.append(ClassScores(label, precision, recall, f1, support))
    total = sum(sum(row) for row in counts)
    correct = sum(counts[i][i] for i in range(len(labels)))
    return ConfusionMatrix(
        labels=list(labels),
        columns=columns,
        counts=counts,
        classes=classes,
        accuracy=correct / total if total else 0.0,
        macro_f1=sum(c.f1 or 0.0 for c in classes) / len(classes) if classes else 0.0,
        total=total,
    )
