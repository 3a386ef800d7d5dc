"""A run lost to a dead worker is resumed from its checkpoint without a person, a bounded
number of times (TRAINBOARD_AUTO_RESUMES); past the bound, or with no checkpoint yet, it stays
failed and says why. The message for the new attempt goes to the real broker."""

from __future__ import annotations

import pytest

from tests.training.conftest import running_run
from training.execution import run_state
from training.execution.liveness import reaper
from training.models import Candidate, EpochLog, Run

pytestmark = pytest.mark.django_db(transaction=True)

CHECKPOINT = {"variables": [], "optimizer": {}}


def lost_run(user, program, dataset, **fields) -> Run:
    run = running_run(
        user, program, dataset, started_age=300, heartbeat_age=120, worker="celery@gone", **fields
    )
    assert reaper.reap_stale() == [run.pk]
    run.refresh_from_db()
    return run


def test_a_lost_run_with_a_checkpoint_is_queued_again_and_sent(
    settings, user, program, demo_dataset
):
    settings.TRAINBOARD_AUTO_RESUMES = 2
    run = lost_run(user, program, demo_dataset, checkpoint_json=CHECKPOINT, checkpoint_epoch=0)
    assert run.status == Run.QUEUED
    assert (run.attempt, run.auto_resumes, run.error, run.finished_at) == (2, 1, "", None)
    assert run.task_id  # the broker took the new attempt's message


def test_past_the_bound_it_stays_failed_and_says_why(settings, user, program, demo_dataset):
    settings.TRAINBOARD_AUTO_RESUMES = 2
    run = lost_run(
        user, program, demo_dataset, checkpoint_json=CHECKPOINT, checkpoint_epoch=0, auto_resumes=2
    )
    assert run.status == Run.FAILED and run.attempt == 1
    assert run.error.startswith("failed: worker lost")
    assert run.error.endswith(
        "It was resumed without a person 2 times already (TRAINBOARD_AUTO_RESUMES), so it "
        "waits for you this time."
    )
    assert run.can_resume  # Resume by hand still continues from the checkpoint


def test_no_automatic_resumes_leaves_it_failed(settings, user, program, demo_dataset):
    settings.TRAINBOARD_AUTO_RESUMES = 0
    run = lost_run(user, program, demo_dataset, checkpoint_json=CHECKPOINT, checkpoint_epoch=0)
    assert run.status == Run.FAILED and run.auto_resumes == 0
    assert "TRAINBOARD_AUTO_RESUMES" not in run.error


def test_a_lost_run_with_no_checkpoint_starts_again_from_the_start(
    settings, user, program, demo_dataset
):
    """Lost in its first epoch: queued again, and its new attempt finds nothing of the
    partial epoch (candidates, epoch rows, optimizer errors), so it runs from the start."""
    settings.TRAINBOARD_AUTO_RESUMES = 2
    run = running_run(
        user, program, demo_dataset, started_age=300, heartbeat_age=120, worker="celery@gone"
    )
    EpochLog.objects.create(run=run, epoch=0, logs={"reward": 0.5})
    Candidate.objects.create(
        run=run,
        epoch=0,
        variable="generator/state",
        candidate_id="c1",
        operation="seed",
        value={},
        reward=0.5,
        status="kept",
    )
    assert reaper.reap_stale() == [run.pk]
    run.refresh_from_db()
    assert (run.status, run.attempt, run.auto_resumes) == (Run.QUEUED, 2, 1)
    run_state.drop_unfinished_epochs(run)  # what the new attempt does first
    assert not EpochLog.objects.filter(run=run).exists()
    assert not Candidate.objects.filter(run=run).exists()
