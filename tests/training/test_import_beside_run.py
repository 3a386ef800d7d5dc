"""A long dataset import beside a training run: the run is not failed as "worker lost".

Before, a 1M-row import held SQLite's write lock for its whole 81 s: the run's heartbeat
writes waited behind it, went stale, and the reaper failed a run whose worker was alive.
Now the import commits in short chunks and the run's Redis pulse proves it alive whatever
the database is doing. Here: a short stale limit, an import several times longer, and the
reaper asked every 50 ms throughout, as ``reap_runs`` and the other runs' heartbeats do.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from datasets import services
from training.models import Run
from training.services import reaper
from training.services.heartbeat import Heartbeat

from .conftest import running_run

pytestmark = pytest.mark.django_db(transaction=True)

STALE = 0.5
ROWS = 20_000


def test_a_long_import_beside_a_training_run_does_not_fail_the_run(
    settings, user, program, demo_dataset
):
    settings.TRAINBOARD_HEARTBEAT_SECONDS = 0.1
    settings.TRAINBOARD_HEARTBEAT_STALE_SECONDS = STALE
    data = "q,a\n" + "".join(f"question {index},{index % 7}\n" for index in range(ROWS))
    upload = services.save_upload(user, SimpleUploadedFile("big.csv", data.encode()))
    run = running_run(user, program, demo_dataset, worker="celery@alive")
    heartbeat = Heartbeat(run.pk, run.attempt)
    heartbeat.start()
    created, errors = [], []

    def import_dataset():
        try:
            created.append(
                services.create_dataset_from_upload(
                    upload,
                    name="Large",
                    mapping_entries=[
                        {"column": "q", "role": "input", "name": "q", "type": "str"},
                        {"column": "a", "role": "target", "name": "a", "type": "int"},
                    ],
                )
            )
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    importer = threading.Thread(target=import_dataset)
    started = time.monotonic()
    importer.start()
    reaped = []
    try:
        while importer.is_alive():
            try:
                reaped += reaper.reap_stale()
            except Exception:  # the lock is busy: reap_forever logs and retries the same way
                pass
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        time.sleep(STALE)  # the reaper's next passes, after the import
        reaped += reaper.reap_stale()
    finally:
        heartbeat.stop()

    assert not errors and created[0].row_count == ROWS
    assert elapsed > 2 * STALE, f"the import took {elapsed:.2f} s: not longer than the limit"
    run.refresh_from_db()
    assert (run.status, run.error, reaped) == (Run.RUNNING, "", [])
    assert not heartbeat.superseded.is_set()
