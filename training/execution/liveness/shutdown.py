"""Runs across a stop of Trainboard: paused at their next batch, resumed at the next start.

Why: stopping ``make run`` (Ctrl-C, or SIGTERM from a service manager) would otherwise kill a
run mid-epoch: its worker lost, the epoch under way done again later, or waiting for a
person. So the stop asks the runs its own worker executes to pause, exactly as the Pause
button does (the checkpoint is saved after the batch under way, with the engine's pause
point), waits a bounded time for them, and marks them ``resume_at_start``; the next start
(``manage.py prepare``) queues them again from there. A run its owner paused stays paused;
one that could not pause in time (its final evaluation) is lost with its worker and resumed
from its last epoch by the reaper (``reaper.resume_without_a_person``).
"""

from __future__ import annotations

import logging
import time

from training.execution import run_state
from training.execution.sending import enqueue
from training.models import Run

logger = logging.getLogger(__name__)


def pause_for_stop(worker_prefix: str, wait_seconds: float) -> tuple[int, int]:
    """Ask the running runs of workers named ``worker_prefix…`` to pause at their next batch
    and wait up to ``wait_seconds`` for them; (how many were asked, how many paused)."""
    running = Run.objects.filter(
        status=Run.RUNNING, worker__startswith=worker_prefix, pause_requested=False
    )
    ids = list(running.values_list("pk", flat=True))
    if not ids:
        return 0, 0
    Run.objects.filter(pk__in=ids, status=Run.RUNNING).update(
        pause_requested=True, resume_at_start=True
    )
    deadline = time.monotonic() + wait_seconds
    while Run.objects.filter(pk__in=ids, status=Run.RUNNING).exists():
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)  # the worker decides at its next batch; nothing to be told by
    paused = Run.objects.filter(pk__in=ids, status=Run.PAUSED).count()
    return len(ids), paused


def resume_at_start() -> list[int]:
    """Queue again the runs a stop paused (each once: the flag is cleared by the update)."""
    resumed = []
    for run_id in Run.objects.filter(status=Run.PAUSED, resume_at_start=True).values_list(
        "pk", flat=True
    ):
        if Run.objects.filter(pk=run_id, status=Run.PAUSED, resume_at_start=True).update(
            **run_state.resumed()
        ):
            enqueue(Run.objects.get(pk=run_id))
            resumed.append(run_id)
    if resumed:
        logger.info("runs %s paused by the last stop: resumed", resumed)
    return resumed
