"""Celery tasks of the training app: sending a run's attempt to a worker, executing it there,
and the worker signals that keep runs honest.

``enqueue`` sits next to the task it sends, so ``training.runs.launch`` (launch, resume)
calls down into this module, and this module calls down into ``attempt``, which executes
them: nothing imports back up (``.importlinter`` checks it).

``execute_run`` acks late and is not re-queued when its worker process dies
(``reject_on_worker_lost=False``): the pool's parent then reports ``WorkerLostError``
and ``task_failure`` marks the run "failed: worker lost" at once. If the whole worker is
killed, the heartbeat reaper does it instead (see training.execution.reaper); a message that
comes back later finds the run no longer queued and does nothing.
"""

from __future__ import annotations

import logging

from billiard.exceptions import WorkerLostError
from celery import shared_task
from celery.signals import task_failure, worker_ready
from django.db import DatabaseError, transaction

from project.redis_config import describe
from training.execution import (
    ablation,  # noqa: F401  (registers its task with the app)
    reaper,
    run_state,
)
from training.execution.attempt import execute
from training.models import Run

logger = logging.getLogger(__name__)

TASK_NAME = "training.execute_run"
# Sending a run to the broker is bounded by the broker's timeouts and publish retry policy
# (project.redis_config: COMMAND_TIMEOUT, CONNECT_TIMEOUT, RETRY_POLICY), so a launch never
# hangs on an unreachable or stalled broker.


@shared_task(name=TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=False)
def execute_run(self, run_id: int, attempt: int) -> str:
    return execute(run_id, attempt, worker=self.request.hostname or "")


def enqueue(run: Run) -> None:
    """Send the run's current attempt to a worker once the transaction commits."""
    run_id, attempt = run.pk, run.attempt
    transaction.on_commit(lambda: send_attempt(run_id, attempt))


def send_attempt(run_id: int, attempt: int, fail_if_refused: bool = True) -> bool:
    """Send one attempt to the broker now; True if it was queued.

    A broker that cannot take it within the bounds above fails the attempt with a message
    that says where the broker is and what to do, instead of leaving the run "queued" with
    no task behind it (nothing would ever claim it). A caller that will try again itself
    (``forgotten_runs``) passes ``fail_if_refused=False``.
    """
    app = execute_run.app
    try:
        result = execute_run.apply_async(args=[run_id, attempt], retry=True)
    except Exception as exc:
        broker = describe(str(app.conf.broker_write_url or app.conf.broker_url or ""))
        logger.warning("run %s attempt %s could not be queued: %s", run_id, attempt, exc)
        if not fail_if_refused:
            return False
        run_state.fail_attempt(
            run_id,
            attempt,
            f"The run could not be queued: the task broker (Redis at {broker}) did not take it "
            f"({type(exc).__name__}: {exc}). Check that Redis is running and REDIS_URL points "
            "to it, then launch the run again.",
        )
        return False
    Run.objects.filter(pk=run_id, attempt=attempt).update(task_id=result.id or "")
    return True


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


# The forecast's calibration of a model (a few calls on a worker): registered with the worker.
from training.execution.calibration import calibrate_model  # noqa: E402,F401
