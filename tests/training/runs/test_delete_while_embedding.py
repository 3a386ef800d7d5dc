"""Deleting a finished run while its population map stores embeddings (PostgreSQL).

A finished run's page asks the web process to embed its candidates (``embed_missing``); a
user who deletes the run meanwhile starts a transaction that deletes those candidates. The
embedding updated them newest first and the delete took them oldest first: on PostgreSQL
each could hold a row the other wanted, a deadlock, and the one PostgreSQL aborted was often
the delete: a 500 on the confirm page, most likely what stopped a CI run's browser test of
deleting a run (its page stayed on the confirm page). Both now lock the run row first, so one
waits for the other.

The interleaving is made certain with a third transaction that holds a middle candidate:
both writers queue behind it, then it lets go.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from tests.support.waiting import until
from tests.training.conftest import make_run
from tests.training.helpers_programs import make_program
from training.insight import population_map
from training.models import Candidate, Run
from training.runs import run_management

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="row locks and deadlocks: PostgreSQL only"
)

LOCK_WAIT_SECONDS = 10


class Worker(threading.Thread):
    """``target()`` on a thread with its own database connection; keeps what it raised and
    its connection's backend pid (to see when that one waits for a lock)."""

    def __init__(self, target):
        super().__init__(daemon=True)
        self.target, self.error = target, None
        self.backend = threading.Event()
        self.pid = None

    def run(self):
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.pid = cursor.fetchone()[0]
            self.backend.set()
            self.target()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.backend.set()
            connection.close()


def until_waiting_for_a_lock(worker: Worker) -> None:
    """Return once ``worker``'s transaction waits for a row lock (fails after a while)."""
    assert worker.backend.wait(LOCK_WAIT_SECONDS) and worker.pid is not None, worker.error

    def waiting_for_a_lock() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [worker.pid]
            )
            found = cursor.fetchone()
        if found and found[0] == "Lock":
            return True
        assert worker.is_alive(), f"it ended without waiting: {worker.error!r}"
        return False

    until(waiting_for_a_lock, LOCK_WAIT_SECONDS, "it waited for a lock")


@pytest.mark.django_db(transaction=True)
def test_a_run_deleted_while_its_map_stores_embeddings_is_deleted(user, demo_dataset, settings):
    settings.TRAINBOARD_EMBEDDING_MODEL = "fake/embedding"
    run = make_run(user, make_program(user, demo_dataset), demo_dataset, status=Run.SUCCEEDED)
    candidates = [
        Candidate.objects.create(
            run=run,
            variable="gen/state",
            candidate_id=f"c{index}",
            value={"instructions": f"route it, take {index}"},
            operation="seed",
            status="kept",
            reward=0.5,
        )
        for index in range(5)
    ]
    middle = candidates[2].pk
    holding, release = threading.Event(), threading.Event()

    def hold_the_middle_candidate():
        with transaction.atomic():
            Candidate.objects.select_for_update().filter(pk=middle).first()
            holding.set()
            release.wait(LOCK_WAIT_SECONDS)

    holder = Worker(hold_the_middle_candidate)
    embedding = Worker(lambda: population_map.embed_missing(run))
    deleting = Worker(lambda: run_management.delete_run(run))
    started = [holder]
    holder.start()
    try:
        assert holding.wait(LOCK_WAIT_SECONDS)
        started.append(embedding)
        embedding.start()
        until_waiting_for_a_lock(embedding)
        started.append(deleting)
        deleting.start()
        until_waiting_for_a_lock(deleting)
    finally:
        release.set()
        for thread in started:
            thread.join(LOCK_WAIT_SECONDS)
    assert not any(thread.is_alive() for thread in started)

    assert deleting.error is None, f"the delete failed: {deleting.error!r}"
    assert embedding.error is None, f"the embedding failed: {embedding.error!r}"
    assert not Run.objects.filter(pk=run.pk).exists()
    assert not Candidate.objects.filter(pk__in=[c.pk for c in candidates]).exists()
