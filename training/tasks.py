"""Celery tasks of the training app, and the worker signals that keep runs honest.

``execute_run`` acks late and is not re-queued when its worker process dies
(``reject_on_worker_lost=False``): the pool's parent then reports ``WorkerLostError``
and ``task_failure`` marks the run "failed: worker lost" at once. If the whole worker is
killed, the heartbeat reaper does it instead (see training.services.reaper); a message that
comes back later finds the run no longer queued and does nothing.
"""

from __future__ import annotations

import logging

from billiard.exceptions import WorkerLostError
from celery import shared_task
from celery.signals import task_failure, worker_ready

logger = logging.getLogger(__name__)

TASK_NAME = "training.execute_run"


@shared_task(name=TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=False)
def execute_run(self, run_id: int, attempt: int) -> str:
    from training.services.execution import execute

    return execute(run_id, attempt, worker=self.request.hostname or "")


@task_failure.connect
def _run_task_failed(sender=None, task_id=None, exception=None, args=None, **kwargs):
    if getattr(sender, "name", None) != TASK_NAME or not args:
        return
    from training.services.reaper import mark_worker_lost

    if isinstance(exception, WorkerLostError):
        mark_worker_lost(
            int(args[0]), f"the worker process died: {exception}", attempt=int(args[1])
        )
    else:
        # execute() turns training errors into a failed run itself; this catches what
        # happens before it can (a broken install, a database error while claiming), so a
        # run never sits "queued" behind a task that already died.
        from training.services.execution import fail_attempt

        fail_attempt(int(args[0]), int(args[1]), f"{type(exception).__name__}: {exception}")


@worker_ready.connect
def _reap_on_worker_start(sender=None, **kwargs):
    from training.services.reaper import reap_stale

    try:
        reaped = reap_stale(worker=getattr(sender, "hostname", None))
        if reaped:
            logger.warning("marked runs %s as failed: worker lost", reaped)
    except Exception:  # a reaper problem must never stop a worker from starting
        logger.exception("reaping stale runs on worker start failed")
