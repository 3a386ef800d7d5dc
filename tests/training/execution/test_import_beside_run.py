"""A long dataset import beside a training run: the run is not failed as "worker lost".

An import that held SQLite's write lock for its whole length (81 s for 1M rows) would keep
the run's heartbeat writes waiting until they went stale and the reaper failed a run whose
worker was alive. So the import commits in short chunks, and the run's Redis pulse proves it
alive whatever the database is doing. Here: a short stale limit, an import several times
longer, and the reaper asked every 50 ms throughout, as ``reap_runs`` and the other runs'
heartbeats do.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from datasets import services
from tests.training.conftest import running_run
from training.execution.liveness import reaper
from training.execution.liveness.heartbeat import Heartbeat
from training.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

STALE = 0.5
#: How often the reaper is asked during the import (``reap_runs`` and the heartbeats' pace).
REAP_EVERY = 0.05
FIRST_ROWS = 20_000
MAPPING = [
    {"column": "q", "role": "input", "name": "q", "type": "str"},
    {"column": "a", "role": "target", "name": "a", "type": "int"},
]


def upload_rows(user, rows: int):
    data = "q,a\n" + "".join(f"question {index},{index % 7}\n" for index in range(rows))
    return services.save_upload(user, SimpleUploadedFile(f"rows-{rows}.csv", data.encode()))


def import_while_reaping(upload) -> tuple[float, list]:
    """Import ``upload`` in a thread while the reaper is asked every 50 ms, as ``reap_runs``
    and the other runs' heartbeats do; returns (seconds the import took, the datasets made)."""
    created, errors = [], []

    def import_dataset():
        try:
            created.append(
                services.create_dataset_from_upload(upload, name="Large", mapping_entries=MAPPING)
            )
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    importer = threading.Thread(target=import_dataset)
    started = time.monotonic()
    importer.start()
    reaped = []
    while importer.is_alive():
        try:
            reaped += reaper.reap_stale()
        except Exception:  # the lock is busy: reap_forever logs and retries the same way
            pass
        importer.join(REAP_EVERY)  # the next pass, or on at once when the import ends
    elapsed = time.monotonic() - started
    time.sleep(STALE)  # wall time past the staleness: a beat the import held up shows now
    reaped += reaper.reap_stale()
    assert not errors and reaped == [], (errors, reaped)
    return elapsed, created


def test_a_long_import_beside_a_training_run_does_not_fail_the_run(
    settings, user, program, demo_dataset
):
    settings.TRAINBOARD_HEARTBEAT_SECONDS = 0.1
    settings.TRAINBOARD_HEARTBEAT_STALE_SECONDS = STALE
    run = running_run(user, program, demo_dataset, worker="celery@alive")
    heartbeat = Heartbeat(run.pk, run.attempt)
    heartbeat.start()
    try:
        # Twice the rows until the import outlasts the stale limit twice over: a fast
        # machine needs more rows than a slow one for the same few seconds.
        rows, elapsed = FIRST_ROWS // 2, 0.0
        while elapsed <= 2 * STALE and rows < 64 * FIRST_ROWS:
            rows *= 2
            elapsed, created = import_while_reaping(upload_rows(user, rows))
            assert created[0].row_count == rows
    finally:
        heartbeat.stop()

    assert elapsed > 2 * STALE, f"{rows} rows took {elapsed:.2f} s: not longer than the limit"
    run.refresh_from_db()
    assert (run.status, run.error) == (Run.RUNNING, "")
    assert not heartbeat.superseded.is_set()
