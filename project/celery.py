"""The Celery application: configured from Django settings (CELERY_* names).

Start workers with ``celery -A project worker``; any number, on any machine that can reach
the same DATABASE_URL and REDIS_URL.
"""

import os

from celery import Celery
from celery.signals import worker_process_init, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # each app's ``tasks`` module (the tests' test_support too)
# The training app's tasks live in its execution room (training.execution.tasks).
app.autodiscover_tasks(["training.execution"])


@worker_process_init.connect
def _preload_local_models(**kwargs):
    """Each worker process loads the local models it will serve as it starts (in a background
    thread: the worker is ready at once, and an early run waits on the same load), not on a
    run's first call. ``TRAINBOARD_PRELOAD_MODELS=0`` turns it off."""
    if os.environ.get("TRAINBOARD_PRELOAD_MODELS", "1") == "0":
        return
    from django.conf import settings

    from training.engine.local import preload

    preload.start_preload([settings.TRAINBOARD_LM, settings.TRAINBOARD_EMBEDDING_MODEL])


_beacons = []


@worker_ready.connect
def _start_beacon(sender=None, **kwargs):
    """The worker's beats in Redis, which the indicator and /healthz read (core.worker_status)."""
    from core.worker_status import Beacon

    beacon = Beacon(getattr(sender, "hostname", None) or "celery")
    beacon.start()
    _beacons.append(beacon)


@worker_shutdown.connect
def _stop_beacon(**kwargs):
    while _beacons:
        _beacons.pop().stop()
