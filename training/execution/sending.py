"""Sending a run's attempt to a worker: the broker message behind a queued run.

Bounded by the broker's timeouts and publish retry policy (project.redis_config:
COMMAND_TIMEOUT, CONNECT_TIMEOUT, RETRY_POLICY), so a launch never hangs on an unreachable or
stalled broker. The task is known here by its name only (``tasks.execute_run`` registers it
in the worker): the reaper and the stop's resume send runs from here, and the tasks module
imports them, so this module never imports the tasks module. A process that has the task
registered (the worker; a test that stands in for its ``apply_async``) sends through it; one
that does not (the web, the reaper) sends the same message by name (``send_task``).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from django.db import transaction

from project.redis_config import describe
from training.execution import run_state
from training.models import Run

logger = logging.getLogger(__name__)

TASK_NAME = "training.execute_run"


def _publish(run_id: int, attempt: int) -> Any:
    """Send the attempt's message: through the registered task (``execute_run``; a test's
    stand-in for its ``apply_async`` too) when this process has it, else by the task's name."""
    app = current_app
    task = app.tasks.get(TASK_NAME)
    if task is not None:
        return task.apply_async(args=[run_id, attempt], retry=True)
    return app.send_task(TASK_NAME, args=[run_id, attempt], retry=True)


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
    app = current_app
    try:
        result = _publish(run_id, attempt)
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
