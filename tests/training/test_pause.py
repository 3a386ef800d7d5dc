"""Pause and resume (issue 30): Pause stops a running run when its current epoch ends (the
checkpoint is per epoch), ends the attempt "paused" so the worker is free, and Resume goes on
from that checkpoint with the same candidates and optimizer state, to the same result as a
run never paused. Runs execute in-process on the scripted fake LM."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db.models import F
from django.urls import reverse

from training.execution import attempt as execution
from training.execution import run_state
from training.insight import timing
from training.models import Candidate, EpochLog, Evaluation, Run
from training.runs import launch

from .conftest import make_run, run_config

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = {"epochs": 3, "evaluations_before": 1, "evaluations_after": 1}


def candidates(run):
    return sorted(
        Candidate.objects.filter(run=run).values_list("candidate_id", "epoch", "reward", "status")
    )


def test_pause_stops_at_the_epochs_end_and_resume_finishes_like_a_run_never_paused(
    client_user, user, program, demo_dataset
):
    straight = make_run(user, program, demo_dataset, run_config(**CONFIG))
    assert execution.execute(straight.pk, 1) == Run.SUCCEEDED
    straight.refresh_from_db()

    run = make_run(user, program, demo_dataset, run_config(**CONFIG))
    # Pause pressed while the attempt runs: the flag is what the worker reads.
    Run.objects.filter(pk=run.pk).update(pause_requested=True)
    assert execution.execute(run.pk, 1) == Run.PAUSED
    run.refresh_from_db()
    assert (run.status, run.checkpoint_epoch, run.pause_requested) == (Run.PAUSED, 0, False)
    assert list(EpochLog.objects.filter(run=run).values_list("epoch", flat=True)) == [0]
    assert not Evaluation.objects.filter(run=run, phase="after").exists()
    assert run.can_resume and not run.is_active
    page = client_user.get(run.get_absolute_url()).content.decode()
    assert 'id="run-paused"' in page and "after epoch 1 of 3" in page
    assert 'id="resume-run"' in page and 'id="pause-run"' not in page
    paused_candidates = candidates(run)

    response = client_user.post(reverse("training:run-resume", args=[run.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert (run.status, run.attempt) == (Run.QUEUED, 2)
    assert execution.execute(run.pk, 2) == Run.SUCCEEDED
    run.refresh_from_db()
    # The epoch-0 candidates are the ones it paused with; the rest as a run never paused.
    assert set(paused_candidates) <= set(candidates(run))
    assert candidates(run) == candidates(straight)
    assert list(EpochLog.objects.filter(run=run).values_list("epoch", "logs")) == list(
        EpochLog.objects.filter(run=straight).values_list("epoch", "logs")
    )
    assert (run.baseline_reward, run.final_reward, run.best_reward) == (
        straight.baseline_reward,
        straight.final_reward,
        straight.best_reward,
    )
    assert Evaluation.objects.filter(run=run, phase="before").count() == 1  # not repeated


def test_pause_is_offered_while_an_epoch_is_still_to_come(client_user, user, program, demo_dataset):
    queued = make_run(user, program, demo_dataset, run_config(**CONFIG))
    assert queued.can_pause
    page = client_user.get(queued.get_absolute_url()).content.decode()
    assert 'id="pause-run"' in page
    assert client_user.post(reverse("training:run-pause", args=[queued.pk])).status_code == 302
    queued.refresh_from_db()
    assert queued.status == Run.PAUSED  # not started: paused at once, nothing to wait for
    last = make_run(user, program, demo_dataset, run_config(**CONFIG), status=Run.RUNNING)
    Run.objects.filter(pk=last.pk).update(current_epoch=2)
    last.refresh_from_db()
    assert not last.can_pause
    with pytest.raises(launch.PauseError):
        launch.request_pause(last)
    running = make_run(user, program, demo_dataset, run_config(**CONFIG), status=Run.RUNNING)
    response = client_user.post(
        reverse("training:run-pause", args=[running.pk]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 204
    running.refresh_from_db()
    assert (running.status, running.pause_requested) == (Run.RUNNING, True)
    page = client_user.get(running.get_absolute_url()).content.decode()
    assert 'id="run-pausing"' in page and "Pausing at the end of epoch 1" in page
    # Cancel still ends a paused run.
    launch.request_cancel(queued)
    queued.refresh_from_db()
    assert queued.status == Run.CANCELLED


def test_only_the_owner_pauses(client, user, other_user, program, demo_dataset):
    run = make_run(user, program, demo_dataset, run_config(**CONFIG), status=Run.RUNNING)
    client.force_login(other_user)
    assert client.post(reverse("training:run-pause", args=[run.pk])).status_code == 404
    run.refresh_from_db()
    assert not run.pause_requested


def test_elapsed_time_counts_the_attempts_running_time_not_the_hour_it_stood_paused(
    client_user, user, program, demo_dataset
):
    run = make_run(user, program, demo_dataset, run_config(**CONFIG))
    Run.objects.filter(pk=run.pk).update(pause_requested=True)
    assert execution.execute(run.pk, 1) == Run.PAUSED
    # The first attempt ran an hour ago: the run then stood paused until now.
    hour = timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(
        started_at=F("started_at") - hour,
        finished_at=F("finished_at") - hour,
        clock_started_at=F("clock_started_at") - hour,
    )
    run.refresh_from_db()
    first = run.duration.total_seconds()
    assert 0 < first < 60 and first == pytest.approx(run.active_seconds, abs=5)

    client_user.post(reverse("training:run-resume", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == Run.QUEUED
    assert run.duration.total_seconds() == pytest.approx(run.active_seconds, abs=1e-3)
    assert timing.timing(run)["ticking"] is False  # waiting in the queue is not running

    assert run_state.claim(run.pk, 2, "worker-1")
    run.refresh_from_db()
    later = run.clock_started_at + timedelta(seconds=run.active_seconds + 10)
    assert timing.timing(run, now=later)["elapsed_seconds"] == pytest.approx(
        run.active_seconds + 10
    )
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED)  # give it back to execute
    assert execution.execute(run.pk, 2) == Run.SUCCEEDED
    run.refresh_from_db()
    took = run.duration.total_seconds()
    assert first < took < 120 and took == pytest.approx(run.active_seconds, abs=5)
    page = re.sub(r"\s+", " ", client_user.get(run.get_absolute_url()).content.decode())
    shown = re.search(r'took <strong class="run-duration">([^<]+)</strong>', page)
    assert shown and "h" not in shown.group(1)
