"""The history chart draws the epoch under way batch by batch: each stored ``batch_end`` adds
its running training reward to ``Run.epoch_so_far`` (which the chart's data carries), the
epoch's end clears it, a batch an abandoned attempt had passed is drawn again from there,
and a long epoch keeps a bounded line."""

from __future__ import annotations

import json

import pytest

from tests.training.conftest import running_run
from training.execution.recording.epoch_line import MAX_EPOCH_POINTS
from training.execution.recording.persistence import PersistenceCallback
from training.insight.sections import contexts
from training.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


class Usage:
    def to_dict(self) -> dict:
        return {}


def stored(run: Run, *events: dict) -> Run:
    """``events`` stored by a fresh callback (as a new attempt or a posted batch would)."""
    callback = PersistenceCallback(run.pk, run.attempt, run.group_name, Usage(), {})
    for event in events:
        callback.store(event)
    run.refresh_from_db()
    return run


def batch(epoch: int, index: int, reward: float, batches: int = 4) -> dict:
    logs = {"reward": reward}
    return {"type": "batch_end", "epoch": epoch, "batch": index, "batches": batches, "logs": logs}


def test_each_batch_adds_its_running_reward_and_the_epoch_end_clears_them(
    user, program, demo_dataset
):
    run = running_run(user, program, demo_dataset)
    run = stored(run, batch(0, 0, 0.5), batch(0, 1, 0.75))
    assert run.epoch_so_far == {"epoch": 0, "batches": 4, "points": [[1, 0.5], [2, 0.75]]}
    chart = json.loads(contexts.history(run, {})["history_json"])
    assert chart["in_epoch"] == run.epoch_so_far
    # another callback (a resumed attempt, the next post of a run from code) goes on from it
    run = stored(run, batch(0, 2, 0.7))
    assert run.epoch_so_far["points"] == [[1, 0.5], [2, 0.75], [3, 0.7]]
    run = stored(run, {"type": "epoch_end", "epoch": 0, "logs": {"reward": 0.7}})
    assert run.epoch_so_far is None
    assert json.loads(contexts.history(run, {})["history_json"])["in_epoch"] is None


def test_an_abandoned_attempts_points_past_the_batch_are_dropped(user, program, demo_dataset):
    run = running_run(user, program, demo_dataset)
    run = stored(run, batch(1, 0, 0.2), batch(1, 1, 0.3), batch(1, 2, 0.4))
    run = stored(run, batch(1, 0, 0.9))
    assert run.epoch_so_far["points"] == [[1, 0.9]]


def test_a_long_epoch_keeps_a_bounded_line_that_ends_at_its_last_batch(user, program, demo_dataset):
    run = running_run(user, program, demo_dataset)
    batches = MAX_EPOCH_POINTS + 50
    run = stored(run, *(batch(0, i, i / batches, batches) for i in range(batches)))
    points = run.epoch_so_far["points"]
    assert len(points) <= MAX_EPOCH_POINTS
    assert points[-1] == [batches, (batches - 1) / batches]
    assert [done for done, _ in points] == sorted(done for done, _ in points)


def test_a_finished_run_draws_no_line_of_an_epoch(user, program, demo_dataset):
    run = running_run(user, program, demo_dataset)
    run = stored(run, batch(0, 0, 0.5))
    Run.objects.filter(pk=run.pk).update(status=Run.FAILED)
    run.refresh_from_db()
    assert json.loads(contexts.history(run, {})["history_json"])["in_epoch"] is None
