"""Cancel, resume from the last completed epoch, and the worker-lost reaper."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.support.waiting import until
from tests.training.conftest import (
    long_fake_run,
    make_run,
    run_config,
    running_run,
    stale_running_run,
)
from training.execution import attempt as execution
from training.execution.liveness import reaper
from training.models import EpochLog, Evaluation, Run
from training.runs import launch as runs

pytestmark = pytest.mark.django_db(transaction=True)


def test_cancel_while_running_stops_after_the_batch_and_keeps_history(user, demo_dataset):
    run = long_fake_run(user, demo_dataset)
    result = {}
    worker = threading.Thread(
        target=lambda: result.update(status=execution.execute(run.pk, run.attempt))
    )
    worker.start()
    until(lambda: EpochLog.objects.filter(run=run).exists(), 30, "the run logged an epoch")
    runs.request_cancel(Run.objects.get(pk=run.pk))
    worker.join(30)
    run.refresh_from_db()
    assert result["status"] == Run.CANCELLED and run.status == Run.CANCELLED
    assert 1 <= EpochLog.objects.filter(run=run).count() < 50
    assert run.trained_program_json is not None and run.can_resume
    assert not Evaluation.objects.filter(run=run, phase="after").exists()


def test_cancel_a_queued_run_is_immediate(client_user, user, program, demo_dataset):
    run = make_run(user, program, demo_dataset)
    client_user.post(reverse("training:run-cancel", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == Run.CANCELLED
    assert execution.execute(run.pk, run.attempt) == "skipped"


def test_resume_continues_from_the_last_completed_epoch(
    user, program, demo_dataset, django_capture_on_commit_callbacks, monkeypatch
):
    run = make_run(user, program, demo_dataset, run_config(epochs=3))
    # First attempt: run only the first epoch, then "die" (we mark it failed like the reaper).
    run.config["epochs"] = 1
    run.save()
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    first_calls = Run.objects.get(pk=run.pk).lm_calls
    Run.objects.filter(pk=run.pk).update(status=Run.FAILED, error="failed: worker lost (test)")
    run.refresh_from_db()
    run.config["epochs"] = 3
    run.save()
    sent = []
    monkeypatch.setattr(
        "training.execution.tasks.execute_run.apply_async",
        lambda args, **options: sent.append(args) or type("R", (), {"id": "t"})(),
    )
    with django_capture_on_commit_callbacks(execute=True):
        run = runs.resume(run)
    assert run.status == Run.QUEUED and run.attempt == 2 and sent == [[run.pk, 2]]
    assert execution.execute(run.pk, 2) == Run.SUCCEEDED
    run.refresh_from_db()
    assert list(EpochLog.objects.filter(run=run).values_list("epoch", flat=True)) == [0, 1, 2]
    # baseline evaluations were not repeated; usage kept counting across attempts
    assert Evaluation.objects.filter(run=run, phase="before").count() == 2
    assert run.lm_calls > first_calls


def test_reaper_marks_a_silent_run_worker_lost(user, program, demo_dataset, client_user, settings):
    settings.TRAINBOARD_HEARTBEAT_STALE_SECONDS = 30
    settings.TRAINBOARD_AUTO_RESUMES = 0  # the run waits for a person (test_auto_resume.py)
    stale = stale_running_run(
        user,
        program,
        demo_dataset,
        checkpoint_json=program.engine_json,
        checkpoint_epoch=0,
    )
    fresh = running_run(user, program, demo_dataset)
    call_command("reap_runs", stdout=io.StringIO())  # one pass of the reaper make run starts
    html = client_user.get(reverse("training:run-poll", args=[stale.pk])).content.decode()
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.status == Run.FAILED and stale.error.startswith("failed: worker lost")
    assert "worker lost" in html and "Resume from epoch 1" in html
    assert fresh.status == Run.RUNNING


def test_worker_restart_reaps_its_own_runs(user, program, demo_dataset):
    mine = running_run(user, program, demo_dataset, worker="w1@host")
    other = running_run(user, program, demo_dataset, worker="w2@host")
    assert reaper.reap_stale(worker="w1@host") == [mine.pk]
    other.refresh_from_db()
    assert other.status == Run.RUNNING


def test_a_task_that_dies_before_claiming_fails_the_run_instead_of_leaving_it_queued(
    user, program, demo_dataset
):
    from training.execution.tasks import _run_task_failed, execute_run

    run = make_run(user, program, demo_dataset)
    _run_task_failed(
        sender=execute_run,
        exception=ImportError("cannot import name 'conf'"),
        args=[run.pk, run.attempt],
    )
    run.refresh_from_db()
    assert run.status == Run.FAILED
    assert run.error == "ImportError: cannot import name 'conf'"
    # A run that already ended is left as it is.
    _run_task_failed(sender=execute_run, exception=RuntimeError("late"), args=[run.pk, run.attempt])
    run.refresh_from_db()
    assert run.error == "ImportError: cannot import name 'conf'"


def _forget_broker_pools() -> None:
    """Close and forget this process's broker connections: the next publish connects anew,
    to whatever address the environment names then."""
    from kombu import pools

    from training.execution.tasks import execute_run

    pools.reset()
    execute_run.app._pool = None
    execute_run.app.amqp._producer_pool = None


@pytest.fixture
def unreachable_broker(monkeypatch):
    """Producers write to a broker nobody listens on. The pools are dropped before (an earlier
    test's pool would still reach the real broker) and after (so later tests get it back)."""
    _forget_broker_pools()
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", "redis://127.0.0.1:1/0")  # nothing listens
    yield
    _forget_broker_pools()


def test_a_launch_the_broker_cannot_take_fails_the_run_with_a_clear_message(
    client_user, user, program, demo_dataset, unreachable_broker
):
    """Redis down or REDIS_URL wrong: the launch still answers (no traceback, no hang) and
    the run says why it failed instead of staying "queued" with no task behind it."""
    from tests.training.test_views import launch_data

    response = client_user.post(
        reverse("training:run-create"), launch_data(program, demo_dataset, metrics=["F1Score"])
    )
    run = Run.objects.get(owner=user)
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.status == Run.FAILED and run.finished_at is not None and run.task_id == ""
    assert run.error.startswith(
        "The run could not be queued: the task broker (Redis at 127.0.0.1:1)"
    )
    assert "launch the run again" in run.error
    page = client_user.get(run.get_absolute_url()).content.decode()
    assert "The run could not be queued" in page
