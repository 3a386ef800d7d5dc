"""Helpers (no tests) for the per-example table: a routing dataset of any size, and a run
whose before/after evaluations are stored through ``persistence.store_evaluation`` (the
worker's own write) with chosen predictions. Also used by ``bench/eval_table_speed.py``."""

from __future__ import annotations

from datasets.models import Dataset, DatasetRow
from tests.training.helpers_programs import make_program
from training.engine.trainers.data_adapter import scoring_positions
from training.execution.recording import persistence
from training.execution.run_config import validate_run_config
from training.models import Run

LABELS = ("money", "bug", "box")
FIELD = [{"name": "message", "type": "str", "description": "A customer's message."}]
TARGET = [{"name": "team", "type": "str", "description": "money, bug or box."}]


def routing_dataset(user, test: int, train: int = 4, name: str = "routing") -> Dataset:
    """``test`` test rows: test example i says ``"message i about <label>"``, its team is
    ``LABELS[i % 3]`` (train rows alike, numbered after them)."""
    dataset = Dataset.objects.create(
        owner=user,
        name=name,
        original_name=f"{name}.jsonl",
        format="jsonl",
        input_fields=FIELD,
        target_fields=TARGET,
        row_count=train + test,
        train_count=train,
        test_count=test,
    )
    rows = [
        DatasetRow(
            dataset=dataset,
            index=i,
            split="train" if i < train else "test",
            data={"message": f"message {j} about {LABELS[j % 3]}", "team": LABELS[j % 3]},
        )
        for i, j in enumerate([*range(test, test + train), *range(test)])
    ]
    DatasetRow.objects.bulk_create(rows, batch_size=1000)
    return dataset


def expected_teams(dataset: Dataset) -> list[str]:
    return [
        row["team"]
        for row in dataset.rows.filter(split="test")
        .order_by("index")
        .values_list("data", flat=True)
    ]


def seeded_run(
    user,
    dataset: Dataset,
    before: list,
    after: list | None,
    candidates: dict[str, list[str]] | None = None,
    **form: object,
) -> Run:
    """A finished run whose evaluations predicted ``before`` / ``after`` (one team or None
    per test example: None is a failed prediction), scored by exact match; ``candidates``:
    {candidate id: its team on each validation row}, stored through the worker's candidate
    event (``seed_candidates``); ``form``: more launch-form values (e.g.
    ``reward_human_marks=True``)."""
    program = make_program(user, dataset)
    config = validate_run_config(
        {
            "reward": "ExactMatch",
            "optimizer": "RandomFewShot",
            "epochs": 1,
            "batch_size": 8,
            **form,
        },
        ["team"],
        ["team"],
        "fake/fewshot",
    )
    run = Run.objects.create(
        owner=user, program=program, dataset=dataset, config=config, status=Run.RUNNING
    )
    truth = expected_teams(dataset)
    for phase, predicted in (("before", before), ("after", after)):
        if predicted is None:
            continue
        rewards = [float(p == t) for p, t in zip(predicted, truth, strict=True)]
        stored = persistence.store_evaluation(
            run.pk,
            run.attempt,
            phase,
            0,
            {"reward": sum(rewards) / len(rewards)},
            sum(p is None for p in predicted),
            {},
            rewards,
            [None if p is None else {"team": p} for p in predicted],
            ["simulated refusal (HTTP 400)" if p is None else None for p in predicted],
        )
        assert stored is not None
    if candidates:
        seed_candidates(run, candidates)
    Run.objects.filter(pk=run.pk).update(status=Run.SUCCEEDED)
    run.refresh_from_db()
    return run


def crafted_predictions(size: int) -> tuple[list, list]:
    """Test example i is LABELS[i % 3]; before: all right but 0, 1 (failed) and 2 (wrong);
    after: all right except 3 and 6 (regressed to "bug") and 9 (failed)."""
    truth = [LABELS[i % 3] for i in range(size)]
    before = list(truth)
    before[0], before[1], before[2] = "box", None, "bug"
    after = list(truth)
    after[3], after[6], after[9] = "bug", "bug", None
    return before, after


def crafted_run(user, size=30) -> Run:
    """A run on a new routing dataset that predicted ``crafted_predictions(size)``."""
    return seeded_run(user, routing_dataset(user, test=size), *crafted_predictions(size))


def validation_teams(run: Run) -> list[str]:
    """The right team of each row the run's optimizer scores candidates on, in order."""
    train = list(
        run.dataset.rows.filter(split="train").order_by("index").values_list("data", flat=True)
    )
    positions = scoring_positions(len(train), float(run.config["validation_split"]))
    return [train[p]["team"] for p in positions]


def seed_candidates(run: Run, candidates: dict[str, list[str]]) -> None:
    """Store each candidate as the worker does (``PersistenceCallback``'s candidate event),
    with its predictions and their exact-match rewards on the validation rows."""
    truth = validation_teams(run)
    callback = persistence.PersistenceCallback(run.pk, run.attempt, "", None, {})
    for number, (candidate_id, teams) in enumerate(candidates.items()):
        rewards = [float(t == r) for t, r in zip(teams, truth, strict=True)]
        callback._on_candidate(
            {
                "variable": "generator/state",
                "candidate_id": candidate_id,
                "parent_ids": [] if number == 0 else [next(iter(candidates))],
                "operation": "seed" if number == 0 else "mutation",
                "value": {"instructions": f"candidate {candidate_id}"},
                "reward": sum(rewards) / len(rewards),
                "status": "scored",
                "epoch": 0,
                "example_rewards": rewards,
                "example_predictions": [{"team": t} for t in teams],
            }
        )
