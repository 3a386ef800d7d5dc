"""Marking runs whose worker died as "failed: worker lost".

A running run's heartbeat is refreshed every few seconds by its worker (see execution).
Celery beat is not running, so the reaper is cheap (one query on the indexed ``status``)
and called from the processes that do the work, never from a page view (a GET only reads):
``reap_forever`` in its own process (``manage.py reap_runs --every 15``, a supervised child
of ``make run`` and of the tests' live stack) so a killed worker is noticed even when nobody
is watching; from every live run's heartbeat thread; and when a worker starts (it also fails
the runs that worker itself was executing).
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from django.db import close_old_connections, connection
from django.db.models import Q
from django.utils import timezone

from training import conf
from training.models import Run

logger = logging.getLogger(__name__)


def stale_after() -> float:
    return float(conf.get("TRAINBOARD_HEARTBEAT_STALE_SECONDS"))


def mark_worker_lost(run_id: int, detail: str, attempt: int | None = None) -> bool:
    """Fail a running run because its worker is gone; True if this call changed it."""
    query = Run.objects.filter(pk=run_id, status=Run.RUNNING)
    if attempt is not None:
        query = query.filter(attempt=attempt)
    now = timezone.now()
    changed = query.update(
        status=Run.FAILED,
        error=f"failed: worker lost ({detail}). Resume continues from the last completed epoch.",
        finished_at=now,
        phase="",
    )
    if changed:
        logger.warning("run %s: worker lost (%s)", run_id, detail)
        try:
            from training.services import live

            live.broadcast_run(run_id)
        except Exception:  # the page still shows it on reload; never fail the reaper on this
            logger.exception("run %s: could not broadcast the worker-lost status", run_id)
    return bool(changed)


def reap_stale(worker: str | None = None) -> list[int]:
    """Fail running runs with a stale heartbeat (or, with ``worker``, all runs it held)."""
    cutoff = timezone.now() - timedelta(seconds=stale_after())
    condition = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    if worker:
        condition |= Q(worker=worker)
    reaped = []
    for run_id, beat in Run.objects.filter(condition, status=Run.RUNNING).values_list(
        "pk", "heartbeat_at"
    ):
        age = (
            f"no heartbeat for {(timezone.now() - beat).total_seconds():.0f} s"
            if beat
            else "no heartbeat"
        )
        detail = f"worker {worker} restarted" if worker else age
        if mark_worker_lost(run_id, detail):
            reaped.append(run_id)
    return reaped


def reap_forever(
    every: float, stop: threading.Event | None = None, iterations: int | None = None
) -> list[int]:
    """Reap now, then every ``every`` seconds until ``stop`` is set (or ``iterations`` passes).

    A failed pass (the database restarting, a locked SQLite file) is logged and retried at the
    next period: the loop itself never dies of it. Returns every run it marked as lost.
    """
    if every <= 0:
        raise ValueError(f"reap_forever: every must be > 0 seconds, got {every}")
    stop = stop or threading.Event()
    reaped: list[int] = []
    passes = 0
    try:
        while True:
            try:
                close_old_connections()  # a connection the database dropped is reopened
                found = reap_stale()
                if found:
                    logger.warning("marked runs %s as failed: worker lost", found)
                reaped += found
            except Exception:
                logger.exception("reaping stale runs failed; retrying in %s s", every)
            passes += 1
            if iterations is not None and passes >= iterations:
                break
            if stop.wait(every):
                break
    finally:
        connection.close()
    return reaped
