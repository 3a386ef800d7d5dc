"""Confusion matrix and per-class precision / recall / F1 of label targets (engine utility)."""

import pytest

from training.engine.utils.confusion import (
    EMPTY,
    FAILED,
    MAX_LABELS,
    OTHER,
    confusion_matrix,
    is_label,
)


def test_counts_and_per_class_scores_match_a_hand_count():
    expected = ["bug", "bug", "bug", "box", "box", "money"]
    predicted = ["bug", "bug", "box", "box", "bug", None]
    m = confusion_matrix(expected, predicted)
    assert m.labels == ["bug", "box", "money"]  # most frequent first
    assert m.columns == ["bug", "box", "money", FAILED]
    assert m.counts == [[2, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 1]]
    bug, box, money = m.classes
    assert (bug.precision, bug.recall, bug.support) == (2 / 3, 2 / 3, 3)
    assert bug.f1 == pytest.approx(2 / 3)
    assert (box.precision, box.recall) == (0.5, 0.5)
    # nothing was predicted "money": its precision and F1 are undefined, its recall 0
    assert (money.precision, money.recall, money.f1) == (None, 0.0, None)
    assert m.accuracy == pytest.approx(3 / 6)
    assert m.macro_f1 == pytest.approx((2 / 3 + 0.5 + 0.0) / 3)


def test_unknown_predictions_get_columns_then_share_other():
    expected = ["a", "b"] * 5
    predicted = ["a", "", "x", "y", "z", "w", "x", "b", "a", "b"]
    m = confusion_matrix(expected, predicted)
    # the three most frequent unknown values get their own column, the rest "(other)"
    assert m.columns[:2] == ["a", "b"]
    assert m.columns[2] == "x" and set(m.columns[3:5]) <= {EMPTY, "y", "z", "w"}
    assert m.columns[-1] == OTHER
    assert sum(map(sum, m.counts)) == 10 == m.total
    # column_of agrees with the counts: each example lands in the column it was counted in
    for column in m.columns:
        counted = sum(row[m.columns.index(column)] for row in m.counts)
        assert counted == sum(m.column_of(p) == column for p in predicted), column
    assert m.column_of(None) == FAILED


def test_values_compare_as_text():
    m = confusion_matrix([1, 2, 1, 2], ["1", 2, True, None])
    assert m.labels == ["1", "2"]
    assert m.counts[0][:2] == [1, 0] and m.counts[1][:2] == [0, 1]
    assert m.column_of(True) == "true"


def test_is_label():
    assert is_label(["bug", "box", "bug", "money", "box", "money"])
    assert not is_label(["only"] * 5)  # one value: nothing to confuse
    assert not is_label([f"answer {i}" for i in range(20)])  # free text
    many = [str(i % (MAX_LABELS + 1)) for i in range(100)]
    assert not is_label(many)  # too many classes
    assert not is_label([{"a": 1}, {"a": 1}, {"b": 2}, {"b": 2}])
    assert not is_label(["a", "b", "c"])  # each value once: not a label


def test_lengths_must_match():
    with pytest.raises(ValueError, match="2 expected values but 1 predictions"):
        confusion_matrix(["a", "b"], ["a"])
