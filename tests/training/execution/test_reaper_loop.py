"""The periodic reaper: a run whose worker died is failed with no page open.

``make run`` starts ``manage.py reap_runs --every 15`` next to the worker; these tests drive
the same loop (``reaper.reap_forever``) with short periods, the command, and the launcher's
wiring.
"""

from __future__ import annotations

import io
import logging
import threading
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from core.local_runtime import launcher
from tests.support.waiting import until
from tests.training.conftest import running_run
from training import conf
from training.execution.liveness import reaper
from training.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def lost_runs_wait_for_a_person(settings):
    """These tests read the reaper's marking; resuming is test_auto_resume.py's."""
    settings.TRAINBOARD_AUTO_RESUMES = 0


class WaitsRecorded(threading.Event):
    """A stop event that records each period the loop waits for (and waits it)."""

    def __init__(self):
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return super().wait(timeout)


def gone_worker_run(user, program, dataset, beat_age: float) -> Run:
    return running_run(
        user, program, dataset, started_age=300, heartbeat_age=beat_age, worker="celery@gone"
    )


def test_loop_fails_a_run_whose_heartbeat_goes_stale_within_one_period(
    settings, monkeypatch, user, program, demo_dataset
):
    settings.TRAINBOARD_HEARTBEAT_STALE_SECONDS = 1.0
    # fresh at the first pass (0.6 s old), stale at the second one 0.6 s later (1.2 s old)
    dying = gone_worker_run(user, program, demo_dataset, beat_age=0.6)
    alive = gone_worker_run(user, program, demo_dataset, beat_age=0.0)
    real_reap = reaper.reap_stale

    def beat_then_reap():  # the healthy run's worker keeps beating between passes
        Run.objects.filter(pk=alive.pk).update(heartbeat_at=timezone.now())
        return real_reap()

    monkeypatch.setattr(reaper, "reap_stale", beat_then_reap)
    passes = []
    monkeypatch.setattr(reaper, "close_old_connections", lambda: passes.append(len(passes)))
    between = WaitsRecorded()
    reaped = reaper.reap_forever(every=0.6, stop=between, iterations=2)
    assert reaped == [dying.pk]
    assert len(passes) == 2 and between.waits == [0.6]  # one period between two passes
    dying.refresh_from_db()
    alive.refresh_from_db()
    assert dying.status == Run.FAILED and dying.error.startswith("failed: worker lost")
    assert "no heartbeat for" in dying.error and "Resume" in dying.error
    assert dying.finished_at is not None
    assert alive.status == Run.RUNNING and alive.error == ""


def test_loop_in_a_thread_reaps_then_stops_promptly(settings, user, program, demo_dataset):
    settings.TRAINBOARD_HEARTBEAT_STALE_SECONDS = 30.0
    stale = gone_worker_run(user, program, demo_dataset, beat_age=120)
    stop = threading.Event()
    result = {}
    thread = threading.Thread(
        target=lambda: result.setdefault("reaped", reaper.reap_forever(every=0.2, stop=stop))
    )
    thread.start()
    until(
        lambda: Run.objects.filter(pk=stale.pk, status=Run.FAILED).exists(),
        5,
        "the loop reaped the stale run",
    )
    stop.set()
    thread.join(timeout=2)
    assert not thread.is_alive()
    assert result["reaped"] == [stale.pk]
    assert Run.objects.get(pk=stale.pk).error.startswith("failed: worker lost")


def test_a_failing_pass_does_not_kill_the_loop(monkeypatch, caplog):
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("database is locked")
        return [42]

    monkeypatch.setattr(reaper, "reap_stale", flaky)
    assert reaper.reap_forever(every=0.01, iterations=3) == [42, 42]
    assert "reaping stale runs failed" in caplog.text
    with pytest.raises(ValueError, match="every must be > 0"):
        reaper.reap_forever(every=0)


def test_reap_runs_command_once_and_in_a_loop(settings, user, program, demo_dataset, caplog):
    settings.TRAINBOARD_HEARTBEAT_STALE_SECONDS = 30.0
    first = gone_worker_run(user, program, demo_dataset, beat_age=90)
    out = io.StringIO()
    call_command("reap_runs", stdout=out)
    assert f"reaped 1 run(s): [{first.pk}]" in out.getvalue()

    second = gone_worker_run(user, program, demo_dataset, beat_age=90)
    caplog.set_level(logging.INFO, logger="training.reaper")
    call_command("reap_runs", "--every", "0.05", "--iterations", "2")
    assert "every 0.05 s" in caplog.text and "stopped; reaped 1 run(s)" in caplog.text
    assert Run.objects.get(pk=second.pk).status == Run.FAILED
    with pytest.raises(CommandError, match="--every must be"):
        call_command("reap_runs", "--every", "0")


def test_make_run_supervises_a_reaper_every_15_seconds(tmp_path, monkeypatch):
    stack = launcher.Stack(base_dir=Path("."), var_dir=tmp_path, env={})
    spawned = []
    monkeypatch.setattr(
        stack, "_spawn", lambda name, args, marker: spawned.append((name, args, marker))
    )
    stack.start_reaper()
    name, args, marker = spawned[0]
    assert name == "reaper" and marker == "reap_runs"
    assert args[1:] == ["manage.py", "reap_runs", "--every", "15"]
    # default staleness (30 s) + one period (15 s): a lost run is failed within a minute
    assert conf.DEFAULTS["TRAINBOARD_HEARTBEAT_STALE_SECONDS"] + 15 < 60
    source = (Path(launcher.__file__).parents[2] / "scripts" / "run.py").read_text()
    assert "stack.start_reaper(every=reap_every)" in source


def test_settings_come_from_the_environment_when_django_does_not_set_them(monkeypatch, settings):
    for name in conf.DEFAULTS:
        if hasattr(settings, name):
            delattr(settings, name)
    monkeypatch.setenv("TRAINBOARD_HEARTBEAT_STALE_SECONDS", "12.5")
    monkeypatch.setenv("TRAINBOARD_SAMPLE_PREDICTIONS", "0")
    assert reaper.stale_after() == 12.5
    assert conf.get("TRAINBOARD_SAMPLE_PREDICTIONS") == 0
    assert conf.get("TRAINBOARD_HEARTBEAT_SECONDS") == 5.0
    monkeypatch.setenv("TRAINBOARD_HEARTBEAT_SECONDS", "soon")
    with pytest.raises(Exception, match="TRAINBOARD_HEARTBEAT_SECONDS='soon'"):
        conf.get("TRAINBOARD_HEARTBEAT_SECONDS")


def test_a_worker_that_starts_before_the_tables_exist_says_so_without_a_traceback(
    monkeypatch, caplog
):
    """``make run`` starts the worker while ``manage.py prepare`` migrates: its start-up
    reaping finds no table, which is expected there and no reason for a traceback."""
    from django.db import OperationalError

    from training.execution.tasks import _reap_on_worker_start

    def no_table(worker=None):
        raise OperationalError("no such table: training_run")

    monkeypatch.setattr(reaper, "reap_stale", no_table)
    _reap_on_worker_start(sender=None)
    (record,) = [r for r in caplog.records if r.name == "training.execution.tasks"]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert "no such table: training_run" in record.getMessage()
