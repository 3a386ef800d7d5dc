"""Fixtures for the training app: users, the demo dataset, programs on scripted fake LMs.

Runs are executed in-process with ``training.execution.attempt.execute`` (the function the
Celery task calls), so these tests need no worker; the ORM work it does from its own thread
needs committed data, hence ``transactional_db`` for those tests.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from datasets.services import create_demo_dataset
from tests.support.fake_cpu import FakeMachine
from training.execution.pace import cpu_meter
from training.models import Run

from .helpers_programs import make_program


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.VAR_DIR = tmp_path / "var"


@pytest.fixture(autouse=True)
def machine(monkeypatch) -> FakeMachine:
    """An idle 2-core machine unless a test loads it: a local model's time forecast follows
    the machine's load (``cpu_meter``), which on a shared machine no test decides."""
    fake = FakeMachine()
    monkeypatch.setattr(cpu_meter, "source", fake)
    return fake


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="a-long-password-1")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("mallory", password="a-long-password-2")


@pytest.fixture
def client_user(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def demo_dataset(user):
    return create_demo_dataset(user)


@pytest.fixture
def no_broker(monkeypatch):
    """Launches and resumes are executed here, in the test, not by a worker: the list of the
    ``[run id, attempt]`` each would have sent to the broker."""
    sent = []

    def record(args, **options):
        sent.append(args)
        return SimpleNamespace(id=f"t{len(sent)}")

    monkeypatch.setattr("training.execution.tasks.execute_run.apply_async", record)
    return sent


@pytest.fixture
def program(user, demo_dataset):
    return make_program(user, demo_dataset)


def run_config(**overrides):
    from training.execution.run_config import validate_run_config

    data = {
        "reward": "ExactMatch",
        "metrics": ["F1Score"],
        "optimizer": "RandomFewShot",
        "rfs_nb_max_examples": 3,
        "epochs": 2,
        "batch_size": 8,
        "validation_split": 0.25,
        "shuffle": True,
        "seed": 7,
        "evaluations_before": 2,
        "evaluations_after": 2,
    }
    data.update(overrides)
    return validate_run_config(data, ["team"], ["team"], data.pop("model", "fake/fewshot"))


def long_fake_run(user, dataset) -> Run:
    """A queued run on a slow-ish fake model with many epochs: still going when a test acts."""
    program = make_program(user, dataset, model="fake/fewshot?latency=0.02")
    return make_run(user, program, dataset, run_config(epochs=50, evaluations_before=0))


def make_run(user, program, dataset, config=None, **fields) -> Run:
    """A run row of ``program`` on ``dataset`` (queued unless ``fields`` say otherwise);
    ``checkpoint_json``, ``checkpoint_epoch`` and ``checkpoint_position`` among ``fields``
    give it a checkpoint (``save_checkpoint``)."""
    saved = {
        key.removeprefix("checkpoint_"): fields.pop(key)
        for key in ("checkpoint_json", "checkpoint_epoch", "checkpoint_position")
        if key in fields
    }
    run = Run.objects.create(
        owner=user, program=program, dataset=dataset, config=config or run_config(), **fields
    )
    if saved:
        save_checkpoint(run, **saved)
    return run


def save_checkpoint(run: Run, **fields) -> Run:
    """Set the run's checkpoint (``json``: the program, ``epoch``, ``position``; the others
    kept), as the persistence callback saves one; the run returned with it read."""
    from training.models import RunCheckpoint

    names = {"json": "program", "epoch": "epoch", "position": "position"}
    RunCheckpoint.objects.update_or_create(
        run_id=run.pk, defaults={names[key]: value for key, value in fields.items()}
    )
    run.refresh_from_db()
    return run


def executed_run(user, program, dataset, **config) -> Run:
    """A one-epoch run (one test evaluation before and after, unless ``config`` says otherwise)
    executed to success in this process, as the worker would; returned refreshed."""
    from training.execution import attempt as execution

    config = {"epochs": 1, "evaluations_before": 1, "evaluations_after": 1, **config}
    run = make_run(user, program, dataset, run_config(**config))
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    return run


def running_run(user, program, dataset, *, started_age=0.0, heartbeat_age=0.0, **fields) -> Run:
    """A run a worker has claimed: started ``started_age`` s ago, its last heartbeat
    ``heartbeat_age`` s ago."""
    from datetime import timedelta

    from django.utils import timezone

    now = timezone.now()
    return make_run(
        user,
        program,
        dataset,
        status=Run.RUNNING,
        started_at=now - timedelta(seconds=started_age),
        heartbeat_at=now - timedelta(seconds=heartbeat_age),
        **fields,
    )


def stale_running_run(user, program, dataset, **fields) -> Run:
    """A run marked running whose heartbeat is 45 s old (stale for a 30 s limit)."""
    return running_run(user, program, dataset, heartbeat_age=45, **fields)


def _close_executor_connection() -> None:
    """Really close the ORM thread's connections.

    Django ignores ``close()`` on an in-memory SQLite test database (it would destroy it), so
    the base class's close is called: the test thread's own connection keeps the shared
    in-memory database alive. Left open, a later non-database test whose consumer calls
    ``close_old_connections`` in this thread would trip pytest-django's database blocker.
    """
    from django.db import connections
    from django.db.backends.base.base import BaseDatabaseWrapper

    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            BaseDatabaseWrapper.close(conn)


@pytest.fixture(autouse=True)
def _no_connection_left_in_the_orm_thread():
    """Runs use sync_to_async's ORM thread; leave no open connection there for later tests."""
    yield
    import asyncio

    from asgiref.sync import sync_to_async

    asyncio.run(sync_to_async(_close_executor_connection)())
