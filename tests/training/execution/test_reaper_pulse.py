"""The reaper fails a run only when its database heartbeat and its Redis pulse are both stale.

A live worker's heartbeat write can wait behind another writer's SQLite lock for longer than
the stale limit; its pulse (a Redis key its own thread refreshes) still proves it alive.
"""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from tests.training.conftest import running_run
from training.execution.liveness import pulse, reaper
from training.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def lost_runs_wait_for_a_person(settings):
    """These tests read the reaper's marking; resuming is test_auto_resume.py's."""
    settings.TRAINBOARD_AUTO_RESUMES = 0


@pytest.fixture(autouse=True)
def _short_limits(settings):
    settings.TRAINBOARD_HEARTBEAT_SECONDS = 0.1
    settings.TRAINBOARD_HEARTBEAT_STALE_SECONDS = 1.0


def stale_run(user, program, dataset) -> Run:
    return running_run(
        user, program, dataset, started_age=300, heartbeat_age=60, worker="celery@busy"
    )


def test_a_stale_database_heartbeat_with_a_live_pulse_is_not_lost(user, program, demo_dataset):
    run = stale_run(user, program, demo_dataset)
    beating = pulse.Pulse(run.pk, run.attempt)
    beating.start()
    try:
        assert reaper.reap_stale() == []
        run.refresh_from_db()
        assert run.status == Run.RUNNING
    finally:
        beating.stop()
    assert reaper.reap_stale() == [run.pk]  # the attempt ended: its pulse is gone at once
    run.refresh_from_db()
    assert run.status == Run.FAILED and "no heartbeat for 60 s" in run.error


def test_a_killed_workers_last_pulse_goes_stale_by_the_reapers_limit(user, program, demo_dataset):
    run = stale_run(user, program, demo_dataset)
    last_beat = time.time() - 2  # what a worker killed 2 s ago left, whatever its own limit
    pulse.client().set(pulse.key(run.pk, run.attempt), repr(last_beat))
    assert reaper.reap_stale() == [run.pk]


def test_another_attempts_pulse_does_not_keep_a_run_alive(user, program, demo_dataset):
    run = stale_run(user, program, demo_dataset)
    old_attempt = pulse.Pulse(run.pk, run.attempt + 1)
    old_attempt.start()
    try:
        assert reaper.reap_stale() == [run.pk]
    finally:
        old_attempt.stop()


def test_redis_unreachable_means_unknown_not_lost(settings, tmp_path, user, program, demo_dataset):
    run = stale_run(user, program, demo_dataset)
    reachable = settings.REDIS_URL
    settings.REDIS_URL = f"unix://{tmp_path / 'no-redis.sock'}"
    assert reaper.reap_stale() == []
    run.refresh_from_db()
    assert run.status == Run.RUNNING
    settings.REDIS_URL = reachable
    assert reaper.reap_stale() == [run.pk]


def test_a_heartbeat_written_while_the_reaper_decides_keeps_the_run(
    monkeypatch, user, program, demo_dataset
):
    run = stale_run(user, program, demo_dataset)
    real_alive = pulse.alive

    def heartbeat_lands_meanwhile(attempts, since):  # the worker's write got the lock just now
        Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
        return real_alive(attempts, since=since)

    monkeypatch.setattr(pulse, "alive", heartbeat_lands_meanwhile)
    assert reaper.reap_stale() == []
    run.refresh_from_db()
    assert run.status == Run.RUNNING
