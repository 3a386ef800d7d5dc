"""Celery tasks of the training app: sending a run's attempt to a worker, executing it there,
and the worker signals that keep runs honest.

Sending lives beside it in ``sending`` (``enqueue``, ``send_attempt``, re-exported here), so
the reaper can queue a lost run again without importing this module, which imports the
reaper; this module calls down into ``attempt``, which executes runs.

``execute_run`` acks late and is not re-queued when its worker process dies
(``reject_on_worker_lost=False``): the pool's parent then reports ``WorkerLostError``
and ``task_failure`` marks the run "failed: worker lost" at once. If the whole worker is
killed, the heartbeat reaper does it instead (see training.execution.liveness.reaper); a
message that comes back later finds the run no longer queued and does nothing.
"""

from __future__ import annotations

import logging

from billiard.exceptions import WorkerLostError
from celery import shared_task
from celery.signals import task_failure, worker_ready
from django.db import DatabaseError

from training.execution import (
    ablation,  # noqa: F401  (registers its task with the app)
    run_state,
)
from training.execution.attempt import execute
from training.execution.liveness import reaper
from training.execution.sending import TASK_NAME, enqueue, send_attempt

__all__ = ["TASK_NAME", "enqueue", "execute_run", "send_attempt"]

logger = logging.getLogger(__name__)


@shared_task(name=TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=False)
def execute_run(self, run_id: int, attempt: int) -> str:
    return execute(run_id, attempt, worker=self.request.hostname or "")


@task_failure.connect
def _run_task_failed(sender=None, task_id=None, exception=None, args=None, **kwargs):
    if getattr(sender, "name", None) != TASK_NAME or not args:
        return
    if isinstance(exception, WorkerLostError):
        reaper.mark_worker_lost(
            int(args[0]), f"the worker process died: {exception}", attempt=int(args[1])
        )
    else:
        # execute() turns training errors into a failed run itself; this catches what
        # happens before it can (a broken install, a database error while claiming), so a
        # run never sits "queued" behind a task that already died.
        run_state.fail_attempt(
            int(args[0]), int(args[1]), f"{type(exception).__name__}: {exception}"
        )


@worker_ready.connect
def _reap_on_worker_start(sender=None, **kwargs):
    try:
        reaped = reaper.reap_stale(worker=getattr(sender, "hostname", None))
        if reaped:
            logger.warning("marked runs %s as failed: worker lost", reaped)
    except DatabaseError as exc:
        # ``make run`` starts the worker while ``manage.py prepare`` migrates: before the
        # tables exist there is nothing to reap (the periodic reaper starts after prepare).
        logger.warning("runs not checked for a lost worker at start (database: %s)", exc)
    except Exception:  # a reaper problem must never stop a worker from starting
        logger.exception("reaping stale runs on worker start failed")
