"""The Celery application: configured from Django settings (CELERY_* names).

Start workers with ``celery -A project worker``; any number, on any machine that can reach
the same DATABASE_URL and REDIS_URL.
"""

import os
import threading

from celery import Celery
from celery.signals import worker_init, worker_process_init, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # each app's ``tasks`` module (the tests' test_support too)
# The training app's tasks live in its execution room (training.execution.tasks).
app.autodiscover_tasks(["training.execution"])
# A judge re-score reads the run page's figures (training.insight.rescore_jobs).
app.autodiscover_tasks(["training.insight"], related_name="rescore_jobs")


_beacons = []


@worker_init.connect
def _start_beacon(sender=None, **kwargs):
    """The worker's beats in Redis, which the indicator and /healthz read (core.worker_status):
    from worker_init on, before the pool starts, saying "starting" until worker_ready and the
    pool's model loading are done (a starting worker is not "down")."""
    from core.worker_status import Beacon

    beacon = Beacon(
        getattr(sender, "hostname", None) or "celery",
        slots=getattr(sender, "concurrency", None) or 1,
    )
    beacon.start()
    _beacons.append(beacon)


@worker_ready.connect
def _mark_ready(sender=None, **kwargs):
    for beacon in _beacons:
        beacon.mark_ready()


@worker_shutdown.connect
def _stop_beacon(**kwargs):
    while _beacons:
        _beacons.pop().stop()


@worker_process_init.connect
def _preload_local_models(sender=None, **kwargs):
    """Each worker process loads the local models it will serve as it starts (in a background
    thread: the worker is ready at once, and an early run waits on the same load), not on a
    run's first call; the worker counts as "starting" meanwhile. ``TRAINBOARD_PRELOAD_MODELS=0``
    turns it off."""
    if os.environ.get("TRAINBOARD_PRELOAD_MODELS", "1") == "0":
        return
    from django.conf import settings

    from core.worker_status import loading_finished, loading_started

    name, pid = sender or "celery", os.getpid()  # prefork sends the worker's name
    loading_started(name, pid)  # first: before worker_ready can say "ready"
    from trainboard_local import preload

    thread = preload.start_preload([settings.TRAINBOARD_LM, settings.TRAINBOARD_EMBEDDING_MODEL])
    if thread is None:
        loading_finished(name, pid)
        return

    def finished_when_loaded():
        thread.join()
        loading_finished(name, pid)

    threading.Thread(target=finished_when_loaded, name="preload-done", daemon=True).start()
