"""``utils.next_steps``: which next-step suggestions apply to a finished run (as data)."""

from training.engine.utils.next_steps import (
    MIN_TRAIN_ROWS,
    label_like,
    next_steps,
    undeclared_labels,
)

LABELS = ["anger", "joy", "optimism", "sadness"]
TARGETS = {"label": [LABELS[i % 4] for i in range(100)]}


def keys(steps):
    return [step.key for step in steps]


def test_the_issue_run_gets_label_set_nearest_and_no_candidate_beat_seed():
    """4-label emotion CSV, label set off, OMEGA: 0 of 8 candidates beat the seed."""
    steps = next_steps(
        optimizer="OMEGA",
        train_rows=80,
        candidates=8,
        beat_seed=0,
        scoring_rows=20,
        targets=TARGETS,
        label_fields={},
        refusals={"punctuation": 1, "repeats": 1},
        before=0.35,
        after=0.35,
    )
    assert keys(steps) == [
        "label_set",
        "nearest_few_shot",
        "no_candidate_beat_seed",
        "junk_rewrites",
    ]
    assert steps[0].change == {"label_set": {"field": "label", "labels": LABELS}}
    assert steps[1].change == {"optimizer": "NearestFewShot"}
    assert steps[3].change == {"refusals": {"punctuation": 1, "repeats": 1}}
    assert steps[0].to_dict()["title"] == "Declare `label` a label set"


def test_a_run_that_learned_gets_no_suggestion():
    steps = next_steps(
        optimizer="NearestFewShot",
        train_rows=80,
        candidates=1,
        beat_seed=1,
        scoring_rows=20,
        targets=TARGETS,
        label_fields={"label": LABELS},
        before=0.35,
        after=0.6,
    )
    assert steps == []


def test_declared_label_set_is_not_suggested_again_and_few_rows_are_named():
    steps = next_steps(
        optimizer="RandomFewShot",
        train_rows=8,
        candidates=2,
        beat_seed=0,
        scoring_rows=2,
        targets={"label": ["a", "b", "a", "b"]},
        label_fields={"label": ["a", "b"]},
    )
    assert keys(steps) == [
        "nearest_few_shot",
        "no_candidate_beat_seed",
        "more_rows",
        "bigger_validation",
    ]
    assert steps[2].change == {"min_train_rows": MIN_TRAIN_ROWS}
    assert "50%" in steps[3].detail


def test_answers_that_never_repeat_are_not_a_label_set():
    assert label_like(["72", "624", "38"]) is None
    assert label_like(["x" * 60, "x" * 60]) is None
    assert label_like(["neg", "pos", "neg"]) == ["neg", "pos"]
    steps = next_steps(
        optimizer="OMEGA",
        train_rows=50,
        candidates=3,
        beat_seed=0,
        targets={"answer": [str(n) for n in range(50)]},
    )
    assert keys(steps) == ["no_candidate_beat_seed"]  # not a label task: no NearestFewShot


def test_a_perfect_run_is_not_told_to_try_something_else():
    """Test 1.0 before and after (nothing to gain): no candidate could beat the seed, and that
    is no reason to change anything."""
    steps = next_steps(
        optimizer="RandomFewShot",
        train_rows=80,
        candidates=3,
        beat_seed=0,
        scoring_rows=20,
        targets=TARGETS,
        label_fields={"label": LABELS},
        refusals={},
        before=1.0,
        after=1.0,
    )
    assert keys(steps) == []


def test_every_step_in_its_order_and_a_perfect_run_is_never_stuck():
    """Each named step (two label sets, then the rest) in the order ``next_steps`` lists them;
    a run that ends perfect gets none of the "stuck" ones, whatever its candidates did."""
    everything = {
        "optimizer": "OMEGA",
        "train_rows": 8,
        "candidates": 3,
        "beat_seed": 0,
        "scoring_rows": 4,
        "targets": {"label": ["a", "b", "a"], "mood": ["up", "up", "down"]},
        "label_fields": {},
        "refusals": {"empty": 2},
        "before": 0.5,
        "after": 0.5,
    }
    assert keys(next_steps(**everything)) == [
        "label_set",
        "label_set",
        "nearest_few_shot",
        "no_candidate_beat_seed",
        "more_rows",
        "bigger_validation",
        "junk_rewrites",
    ]
    assert keys(next_steps(**{**everything, "after": 1.0})) == [
        "label_set",
        "label_set",
        "more_rows",
        "bigger_validation",
        "junk_rewrites",
    ]
    assert undeclared_labels(everything["targets"], {"mood": ["down", "up"]}) == {
        "label": ["a", "b"]
    }
