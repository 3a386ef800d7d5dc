"""The forecast's queue counts the worker processes alive now (each worker's beat says its
pool size), not the configured TRAINBOARD_WORKER_CONCURRENCY: on a real Redis of its own."""

from __future__ import annotations

import pytest

from core import worker_status
from tests.private_redis import private_redis_fixture  # noqa: F401  (fixture "private_redis")
from training.execution.pace import machine

pytestmark = pytest.mark.django_db


def test_the_queue_counts_the_pools_of_the_workers_alive(settings, private_redis):
    for name, value in private_redis.settings().items():
        setattr(settings, name, value)
    settings.TRAINBOARD_WORKER_CONCURRENCY = 2
    beacons = [worker_status.Beacon("a@test", slots=3), worker_status.Beacon("b@test", slots=1)]
    try:
        worker_status.forget()
        assert machine.machine()["workers"] == 2  # none beats: the setting
        for beacon in beacons:
            beacon.start()
            beacon.mark_ready()
        worker_status.forget()
        assert machine.machine()["workers"] == 4
        beacons[0].stop()  # one worker goes: its three processes with it
        worker_status.forget()
        assert machine.machine()["workers"] == 1
    finally:
        for beacon in beacons:
            if beacon.is_alive():
                beacon.stop()
        worker_status.forget()
