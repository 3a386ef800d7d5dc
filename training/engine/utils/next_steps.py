"""``next_steps``: why a run did not learn, and what to try next — as data.

Why: "0 of 8 candidates beat the seed" leaves a new user stuck. What fit and the run already
know (how many candidates beat the seed, whether the target looks like a label set the output
does not declare, how many training rows there were, what OMEGA refused) is enough to say
which change usually helps on a small model: declare the label set (grammar-constrained
answers: 0.000 -> 0.708 zero-shot on a two-label task, measured on the local 135M model),
retrieve the nearest examples (``NearestFewShot``), add rows. The dashboard renders the
suggestions; this function only decides which apply, so the rules live in one place: one
named step per suggestion (``_label_set``, ``_nearest_few_shot``, ...), each None when it
does not apply, listed in ``next_steps`` most useful first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: Fewer training rows than this: too few to learn from or to score candidates on.
MIN_TRAIN_ROWS = 20
#: Fewer scoring rows than this: one row is more than a 10% reward step (the tie margin).
MIN_SCORING_ROWS = 10
#: A target field looks like a label set with at most this many distinct values, each at
#: most LABEL_CHARS long, and some value repeating.
MAX_LABELS = 12
LABEL_CHARS = 40
#: A test reward gain below this counts as "did not improve".
MIN_GAIN = 0.05


@dataclass(frozen=True)
class Suggestion:
    """One next step: ``key`` (stable, for templates), ``title`` and ``detail`` in words, and
    ``change``: what to change, as data (``{"optimizer": "NearestFewShot"}``,
    ``{"label_set": {"field": "label", "labels": [...]}}``)."""

    key: str
    title: str
    detail: str
    change: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def label_like(values: Sequence[Any]) -> list[str] | None:
    """The sorted distinct values of a target field when they look like a label set (few,
    short strings, some repeating), else None."""
    if not values or not all(isinstance(v, str) for v in values):
        return None
    distinct = sorted(set(values))
    if len(distinct) > MAX_LABELS or len(distinct) >= len(values):
        return None
    if any(len(v) > LABEL_CHARS or not v.strip() for v in distinct):
        return None
    return distinct


def next_steps(
    *,
    optimizer: str,
    train_rows: int,
    candidates: int = 0,
    beat_seed: int = 0,
    scoring_rows: int | None = None,
    targets: Mapping[str, Sequence[Any]] | None = None,
    label_fields: Mapping[str, Sequence[str]] | None = None,
    refusals: Mapping[str, int] | None = None,
    before: float | None = None,
    after: float | None = None,
) -> list[Suggestion]:
    """The suggestions that apply to a finished run, most useful first.

    Args:
        optimizer: the run's optimizer class name.
        train_rows: rows given to ``fit`` (before its validation split).
        candidates: candidates scored besides the seed (the ``selection`` event's
            ``candidates``, summed over variables).
        beat_seed: how many of them beat the seed (its ``beat_seed``).
        scoring_rows: rows candidates were scored on (validation, else training).
        targets: {output field: the training targets' values}.
        label_fields: {output field: its labels} for fields declared a label set
            (``optimizers.label_balance.label_fields(output_model)``).
        refusals: OMEGA's ``refusals`` ({rule: count}).
        before, after: the test reward before and after fit.

    Returns:
        A list of :class:`Suggestion` (``[s.to_dict() for s in ...]`` for JSON).

    Example:

    ```python
    steps = next_steps(optimizer="OMEGA", train_rows=100, candidates=8, beat_seed=0,
                       targets={"label": y_labels}, label_fields={})
    [s.key for s in steps]  # ['label_set', 'nearest_few_shot', ...]
    ```
    """
    label_fields = dict(label_fields or {})
    stuck = _stuck(candidates, beat_seed, before, after)
    undeclared = undeclared_labels(targets, label_fields)
    found = [
        *(_label_set(name, labels) for name, labels in undeclared.items()),
        _nearest_few_shot(optimizer, stuck, is_label_task=bool(label_fields or undeclared)),
        _no_candidate_beat_seed(stuck, candidates, beat_seed),
        _more_rows(train_rows),
        _bigger_validation(scoring_rows),
        _junk_rewrites(optimizer, refusals),
    ]
    return [step for step in found if step is not None]


def _stuck(candidates: int, beat_seed: int, before: float | None, after: float | None) -> bool:
    """The run did not learn: candidates were scored and none beat the seed, or the test
    reward gained less than ``MIN_GAIN``; never when it ends perfect (nothing left to learn
    on this split)."""
    if after is not None and after >= 1.0:
        return False
    not_improved = before is not None and after is not None and after - before < MIN_GAIN
    return (candidates > 0 and beat_seed == 0) or not_improved


def undeclared_labels(
    targets: Mapping[str, Sequence[Any]] | None, label_fields: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """{output field: its labels} for each field whose targets look like a label set
    (``label_like``) that the output does not declare one."""
    return {
        name: labels
        for name, values in (targets or {}).items()
        if name not in label_fields and (labels := label_like(list(values))) is not None
    }


def _label_set(name: str, labels: list[str]) -> Suggestion:
    return Suggestion(
        "label_set",
        f"Declare `{name}` a label set",
        f"Its targets take {len(labels)} values ({', '.join(labels[:6])}"
        f"{', ...' if len(labels) > 6 else ''}). As a label set the model can only "
        "answer one of them; a small model gains the most from this.",
        {"label_set": {"field": name, "labels": labels}},
    )


def _nearest_few_shot(optimizer: str, stuck: bool, *, is_label_task: bool) -> Suggestion | None:
    if not (stuck and is_label_task and optimizer != "NearestFewShot"):
        return None
    return Suggestion(
        "nearest_few_shot",
        "Retrieve the nearest examples (NearestFewShot)",
        "It shows each input the training examples most like it; on a label task the "
        "local model learns far more from those than from rewritten instructions.",
        {"optimizer": "NearestFewShot"},
    )


def _no_candidate_beat_seed(stuck: bool, candidates: int, beat_seed: int) -> Suggestion | None:
    if not (stuck and candidates > 0 and beat_seed == 0):
        return None
    return Suggestion(
        "no_candidate_beat_seed",
        f"None of {candidates} candidates beat the start",
        "The program kept its starting prompt, so the test reward could not move.",
    )


def _more_rows(train_rows: int) -> Suggestion | None:
    if train_rows >= MIN_TRAIN_ROWS:
        return None
    return Suggestion(
        "more_rows",
        "Add training rows",
        f"{train_rows} rows are few to learn from; {MIN_TRAIN_ROWS} or more help.",
        {"min_train_rows": MIN_TRAIN_ROWS},
    )


def _bigger_validation(scoring_rows: int | None) -> Suggestion | None:
    if scoring_rows is None or not 0 < scoring_rows < MIN_SCORING_ROWS:
        return None
    return Suggestion(
        "bigger_validation",
        "Score candidates on more rows",
        f"With {scoring_rows} scoring rows a candidate must win a whole row "
        f"({1 / scoring_rows:.0%} of the reward) to be kept.",
        {"min_scoring_rows": MIN_SCORING_ROWS},
    )


def _junk_rewrites(optimizer: str, refusals: Mapping[str, int] | None) -> Suggestion | None:
    refused = sum((refusals or {}).values())
    if not refused or optimizer != "OMEGA":
        return None
    return Suggestion(
        "junk_rewrites",
        f"{refused} rewrite(s) were refused as junk",
        "The optimizer's model wrote unusable instructions (empty, repeated, invented "
        "labels...). Give OMEGA task guidance or a stronger optimizer model.",
        {"refusals": dict(refusals or {})},
    )


__all__ = ["Suggestion", "label_like", "next_steps", "undeclared_labels"]
