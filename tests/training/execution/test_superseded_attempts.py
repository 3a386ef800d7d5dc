"""An attempt superseded while its worker is alive (reaped, then resumed elsewhere) stops
and writes nothing: the persistence callback and the heartbeat both notice."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import OperationalError
from django.db.models.query import QuerySet

from tests.support.waiting import until
from tests.training.conftest import long_fake_run, running_run, save_checkpoint
from training.execution import attempt as execution
from training.execution.liveness.heartbeat import Heartbeat
from training.execution.recording.persistence import PersistenceCallback
from training.models import Candidate, EpochLog, OptimizerError, Run

pytestmark = pytest.mark.django_db(transaction=True)


class _Program:
    stop_training = False
    failed_predictions = 0

    def get_config(self):
        return {"checkpoint": "from the superseded attempt"}


class _Tracker:
    def to_dict(self):
        return {}


def _events(epoch=1):
    return [
        {"type": "epoch_begin", "epoch": epoch, "epochs": 3},
        {"type": "batch_end", "epoch": epoch, "batch": 0, "batches": 4, "logs": {}},
        {
            "type": "candidate",
            "epoch": epoch,
            "variable": "generator/state",
            "candidate_id": "c2",
            "parent_ids": ["c1"],
            "operation": "few_shot",
            "value": {"instructions": "stale"},
            "reward": 1.0,
            "novelty": None,
            "status": "scored",
        },
        {
            "type": "optimizer_error",
            "epoch": epoch,
            "variable": "generator/state",
            "operation": "mutation",
            "error": "stale",
        },
        {"type": "epoch_end", "epoch": epoch, "logs": {"reward": 1.0}},
    ]


def _resumed_elsewhere(run):
    """What the reaper + a resume + the new attempt's claim leave in the row."""
    Run.objects.filter(pk=run.pk).update(
        attempt=2, status=Run.RUNNING, current_batch=0, current_epoch=1
    )
    save_checkpoint(run, epoch=0)


async def _feed(callback, events):
    for event in events:
        await callback.on_event(event)


def test_superseded_attempt_callback_stops_training_and_writes_nothing(user, program, demo_dataset):
    run = running_run(user, program, demo_dataset)
    callback = PersistenceCallback(run.pk, 1, run.group_name, _Tracker(), {})
    fake = _Program()
    callback.set_program(fake)
    _resumed_elsewhere(run)

    asyncio.run(_feed(callback, _events()))

    assert fake.stop_training is True and callback.superseded.is_set()
    assert not Candidate.objects.filter(run=run).exists()
    assert not OptimizerError.objects.filter(run=run).exists()
    assert not EpochLog.objects.filter(run=run).exists()
    run.refresh_from_db()
    assert (run.attempt, run.current_batch, run.current_epoch) == (2, 0, 1)
    assert run.checkpoint_json is None and run.checkpoint_epoch == 0


def test_a_reaped_attempt_stops_too(user, program, demo_dataset):
    run = running_run(user, program, demo_dataset)
    callback = PersistenceCallback(run.pk, 1, run.group_name, _Tracker(), {})
    fake = _Program()
    callback.set_program(fake)
    Run.objects.filter(pk=run.pk).update(status=Run.FAILED, error="failed: worker lost (test)")

    asyncio.run(_feed(callback, _events(epoch=0)))

    assert fake.stop_training is True
    assert not EpochLog.objects.filter(run=run).exists()
    assert not Candidate.objects.filter(run=run).exists()


def test_the_heartbeat_notices_a_superseded_attempt_and_the_callback_obeys(
    user, program, demo_dataset
):
    run = running_run(user, program, demo_dataset)
    heartbeat = Heartbeat(run.pk, 1)
    assert heartbeat.beat() and not heartbeat.superseded.is_set()
    _resumed_elsewhere(run)
    assert heartbeat.beat() and heartbeat.superseded.is_set()

    callback = PersistenceCallback(
        run.pk, 1, run.group_name, _Tracker(), {}, superseded=heartbeat.superseded
    )
    fake = _Program()
    callback.set_program(fake)
    asyncio.run(_feed(callback, _events()[2:3]))  # a candidate event, no batch_end first
    assert fake.stop_training is True
    assert not Candidate.objects.filter(run=run).exists()


def test_a_locked_database_makes_the_heartbeat_retry_not_raise(
    user, program, demo_dataset, monkeypatch, caplog
):
    run = running_run(user, program, demo_dataset)
    heartbeat = Heartbeat(run.pk, 1)
    real_update = QuerySet.update
    monkeypatch.setattr(
        QuerySet,
        "update",
        lambda self, **kw: (_ for _ in ()).throw(OperationalError("database is locked")),
    )
    assert heartbeat.beat() is False
    assert not heartbeat.superseded.is_set()  # locked is not "superseded"
    assert "database is locked" in caplog.text
    monkeypatch.setattr(QuerySet, "update", real_update)
    assert heartbeat.beat() is True and not heartbeat.superseded.is_set()


def test_a_running_worker_stops_when_its_run_is_resumed_elsewhere(user, demo_dataset):
    run = long_fake_run(user, demo_dataset)
    result = {}
    worker = threading.Thread(target=lambda: result.update(status=execution.execute(run.pk, 1)))
    worker.start()
    until(lambda: EpochLog.objects.filter(run=run).exists(), 30, "the run logged an epoch")
    # Reaped as "worker lost" while alive, then resumed: the row now belongs to attempt 2.
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED, attempt=2, error="")
    counts = (
        EpochLog.objects.filter(run=run).count(),
        Candidate.objects.filter(run=run).count(),
        OptimizerError.objects.filter(run=run).count(),
    )
    worker.join(30)
    assert not worker.is_alive()
    assert result["status"] == "superseded"
    assert counts == (
        EpochLog.objects.filter(run=run).count(),
        Candidate.objects.filter(run=run).count(),
        OptimizerError.objects.filter(run=run).count(),
    )
    run.refresh_from_db()
    assert (run.status, run.attempt, run.error) == (Run.QUEUED, 2, "")
    assert counts[0] < 50
