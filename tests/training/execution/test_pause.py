"""Pause and resume: Pause stops a running run after its current batch (the
checkpoint saved there with the engine's pause point; OMEGA's step under way finished), ends
the attempt "paused" so the worker is free, and Resume goes on from exactly that batch with
the same candidates, optimizer state and random draws, to the same result as a run never
paused. Runs execute in-process on the scripted fake LMs (RandomFewShot and OMEGA)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db.models import F
from django.urls import reverse

from tests.training.conftest import make_program, make_run, run_config, save_checkpoint
from training.execution import attempt as execution
from training.execution import run_state
from training.insight import timing
from training.models import Candidate, EpochLog, Evaluation, OptimizerError, Run
from training.runs import launch

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = {"epochs": 3, "evaluations_before": 1, "evaluations_after": 1}


def candidates(run):
    return sorted(
        Candidate.objects.filter(run=run).values_list("candidate_id", "epoch", "reward", "status")
    )


OMEGA = {
    "optimizer": "OMEGA",
    "omega_embedding_model": "fake/embedding",
    "omega_population_size": 4,
}
OPTIMIZERS = [("fake/fewshot", {}), ("fake/rules", OMEGA)]


def epoch_logs(run):
    return list(EpochLog.objects.filter(run=run).values_list("epoch", "logs"))


def figures(run):
    return (run.baseline_reward, run.final_reward, run.best_reward)


def pause_and_execute(run, attempt):
    """Pause pressed while the attempt runs (the flag is what the worker reads), executed."""
    Run.objects.filter(pk=run.pk).update(pause_requested=True)
    status = execution.execute(run.pk, attempt)
    run.refresh_from_db()
    return status


@pytest.mark.parametrize(("model", "extra"), OPTIMIZERS, ids=["rfs", "omega"])
def test_pause_stops_after_the_current_batch_and_resume_finishes_like_a_run_never_paused(
    client_user, user, demo_dataset, model, extra
):
    program = make_program(user, demo_dataset, model=model)
    config = run_config(model=model, **CONFIG, **extra)
    straight = make_run(user, program, demo_dataset, config)
    assert execution.execute(straight.pk, 1) == Run.SUCCEEDED
    straight.refresh_from_db()
    assert Candidate.objects.filter(run=straight).exclude(operation="seed").count() >= 3

    run = make_run(user, program, demo_dataset, config)
    assert pause_and_execute(run, 1) == Run.PAUSED
    # Stopped after the first batch of epoch 1, inside the epoch: nothing of it lost.
    point = run.checkpoint_position
    assert (run.status, run.pause_requested, run.checkpoint_epoch) == (Run.PAUSED, False, None)
    assert (point["epoch"], point["batch"], run.current_epoch, run.current_batch) == (0, 1, 0, 1)
    assert len(point["rewards"]) == 8 and len(point["metrics"]) == 1  # one batch, one metric
    assert not EpochLog.objects.filter(run=run).exists()
    assert not Evaluation.objects.filter(run=run, phase="after").exists()
    assert run.can_resume and not run.is_active
    steps = run.batches_per_epoch
    page = re.sub(r"\s+", " ", client_user.get(run.get_absolute_url()).content.decode())
    assert 'id="run-paused"' in page and f"in epoch 1 of 3, after batch 1 of {steps}" in page
    assert 'id="resume-run"' in page and 'id="pause-run"' not in page
    paused_candidates = candidates(run)

    # Resumed, and paused again after every batch (the epochs' ends between them): each
    # attempt goes on from exactly where the last one paused.
    attempt, positions = 1, [(0, 1)]
    while run.status == Run.PAUSED:
        assert client_user.post(reverse("training:run-resume", args=[run.pk])).status_code == 302
        attempt += 1
        status = pause_and_execute(run, attempt)
        if status == Run.PAUSED:
            positions.append((run.checkpoint_position["epoch"], run.checkpoint_position["batch"]))
    assert run.status == Run.SUCCEEDED and run.attempt == attempt
    # Every batch boundary of the three epochs, the last batch of each (its end still to
    # come) included, and each epoch's end (asked while it ran: batch 0 of the next), up to
    # the last batch of the last epoch (its end, the train end and the evaluations after).
    every = [
        (epoch, batch)
        for epoch in range(3)
        for batch in ([0] if epoch else []) + list(range(1, steps + 1))
    ]
    assert positions == every
    # The candidates it paused with are kept (scored once; a competition may drop them
    # later); the rest as a run never paused.
    assert {c[:3] for c in paused_candidates} <= {c[:3] for c in candidates(run)}
    assert candidates(run) == candidates(straight)
    assert epoch_logs(run) == epoch_logs(straight)
    assert figures(run) == figures(straight)
    assert Evaluation.objects.filter(run=run, phase="before").count() == 1  # not repeated


def optimizer_errors(run):
    return list(
        OptimizerError.objects.filter(run=run)
        .order_by("pk")
        .values_list("epoch", "variable", "operation", "error")
    )


def test_a_pause_resumed_twice_from_the_same_checkpoint_stores_each_optimizer_error_once(
    client_user, user, demo_dataset
):
    """An attempt that went on from a pause's checkpoint and stopped without saving a newer
    one (its worker died) left the optimizer errors of the batches it trained in the paused
    epoch; the next resume trains those batches again and reports the same errors. They are
    stored once: the rows past the checkpoint's ``errors_reported`` go before it resumes."""
    failing = {**OMEGA, "omega_language_model": "fake/echo?failure_rate=1&failure=fatal"}
    program = make_program(user, demo_dataset, model="fake/fewshot")
    config = run_config(model="fake/fewshot", **CONFIG, **failing)
    straight = make_run(user, program, demo_dataset, config)
    assert execution.execute(straight.pk, 1) == Run.SUCCEEDED
    assert len(optimizer_errors(straight)) >= 3  # one failed step a batch end at least

    run = make_run(user, program, demo_dataset, config)
    assert pause_and_execute(run, 1) == Run.PAUSED
    checkpoint = {"json": run.checkpoint_json, "position": run.checkpoint_position}
    assert run.checkpoint_json["compile"]["optimizer"]["state"]["errors_reported"] == len(
        optimizer_errors(run)
    )
    launch.resume(run)
    assert pause_and_execute(run, 2) == Run.PAUSED  # one batch more, its error stored
    assert (
        len(optimizer_errors(run))
        > checkpoint["json"]["compile"]["optimizer"]["state"]["errors_reported"]
    )
    # ... but its worker died before its checkpoint was written: the run still holds the
    # first pause's.
    save_checkpoint(run, **checkpoint)
    launch.resume(run)
    assert execution.execute(run.pk, 3) == Run.SUCCEEDED
    run.refresh_from_db()
    assert optimizer_errors(run) == optimizer_errors(straight)


def test_an_epoch_paused_and_resumed_is_judged_whole_when_all_its_predictions_failed(
    user, demo_dataset
):
    """Every prediction fails: the run fails after its first epoch, and the message counts
    the whole epoch (its part before the pause is the pause point's), as a run never paused
    says it."""
    always_fails = "fake/fewshot?failure_rate=1&failure=fatal"
    program = make_program(user, demo_dataset, model=always_fails)
    config = run_config(model=always_fails, **{**CONFIG, "evaluations_before": 0})
    straight = make_run(user, program, demo_dataset, config)
    assert execution.execute(straight.pk, 1) == Run.FAILED
    straight.refresh_from_db()
    assert "predictions of training epoch 1 failed" in straight.error

    run = make_run(user, program, demo_dataset, config)
    assert pause_and_execute(run, 1) == Run.PAUSED
    before = run.checkpoint_position["predictions"]
    assert before["made"] == before["failed"] > 0
    launch.resume(run)
    assert execution.execute(run.pk, 2) == Run.FAILED
    run.refresh_from_db()
    assert run.error == straight.error


def test_a_resumed_pause_measures_its_pace_from_the_batch_it_resumed_at(
    client_user, user, demo_dataset
):
    """The ETA's pace counts only the batches this attempt trained: a paused fit resumed at
    batch 1 of epoch 0 starts its count there, not at the epoch's first batch."""
    program = make_program(user, demo_dataset, model="fake/fewshot")
    run = make_run(user, program, demo_dataset, run_config(model="fake/fewshot", **CONFIG))
    assert pause_and_execute(run, 1) == Run.PAUSED
    assert (run.checkpoint_position["epoch"], run.checkpoint_position["batch"]) == (0, 1)
    assert client_user.post(reverse("training:run-resume", args=[run.pk])).status_code == 302
    assert pause_and_execute(run, 2) == Run.PAUSED  # one more batch: paused after batch 2
    assert (run.current_epoch, run.current_batch) == (0, 2)
    assert run.training_start_batch == 1
    assert timing.timing(run)["batches_since_start"] == 1


def test_pause_asked_during_an_epochs_end_pauses_there(client_user, user, program, demo_dataset):
    """The epoch's end (candidates scored, validation) has no batch boundary: a pause asked
    while it runs waits for it, and the checkpoint is that epoch's."""
    straight = make_run(user, program, demo_dataset, run_config(**CONFIG))
    assert execution.execute(straight.pk, 1) == Run.SUCCEEDED
    straight.refresh_from_db()
    run = make_run(user, program, demo_dataset, run_config(**CONFIG))
    from training.execution.recording import persistence

    original = persistence.PersistenceCallback._on_epoch_end

    def asked_now(self, event):
        Run.objects.filter(pk=self.run_id).update(pause_requested=True)
        return original(self, event)

    persistence.PersistenceCallback._on_epoch_end = asked_now
    try:
        assert execution.execute(run.pk, 1) == Run.PAUSED
    finally:
        persistence.PersistenceCallback._on_epoch_end = original
    run.refresh_from_db()
    assert (run.checkpoint_epoch, run.checkpoint_position["batch"]) == (0, 0)
    assert run.paused_inside_epoch is None
    page = client_user.get(run.get_absolute_url()).content.decode()
    assert "after epoch 1 of 3" in page
    launch.resume(run)
    assert execution.execute(run.pk, 2) == Run.SUCCEEDED
    run.refresh_from_db()
    assert candidates(run) == candidates(straight) and epoch_logs(run) == epoch_logs(straight)
    assert figures(run) == figures(straight)


def test_pause_is_offered_while_training_is_still_to_do(client_user, user, program, demo_dataset):
    queued = make_run(user, program, demo_dataset, run_config(**CONFIG))
    assert queued.can_pause
    page = client_user.get(queued.get_absolute_url()).content.decode()
    assert 'id="pause-run"' in page
    assert client_user.post(reverse("training:run-pause", args=[queued.pk])).status_code == 302
    queued.refresh_from_db()
    assert queued.status == Run.PAUSED  # not started: paused at once, nothing to wait for
    last = make_run(user, program, demo_dataset, run_config(**CONFIG), status=Run.RUNNING)
    Run.objects.filter(pk=last.pk).update(current_epoch=2)  # in its last epoch: still can
    last.refresh_from_db()
    assert last.can_pause
    Run.objects.filter(pk=last.pk).update(current_epoch=3)  # training done: evaluating
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
    assert (
        'id="run-pausing"' in page and "Pausing after the current batch (epoch 1, batch 1" in page
    )
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
