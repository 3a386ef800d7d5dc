"""Marking runs whose worker died as "failed: worker lost".

A running run's heartbeat is refreshed every few seconds by its worker (see execution).
Celery beat is not running, so the reaper is cheap and called opportunistically: from the
runs list and run pages (throttled per process), from every live run's heartbeat thread,
and when a worker starts (it also fails the runs that worker itself was executing).
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from training.models import Run

logger = logging.getLogger(__name__)
_last_reap = {"at": 0.0}


def stale_after() -> float:
    return float(getattr(settings, "TRAINBOARD_HEARTBEAT_STALE_SECONDS", 30.0))


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

            live.broadcast(Run.objects.select_related("program").get(pk=run_id))
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


def reap_if_due(min_interval: float = 5.0) -> list[int]:
    """The page-view trigger: reap at most every ``min_interval`` seconds per process."""
    now = time.monotonic()
    if now - _last_reap["at"] < min_interval:
        return []
    _last_reap["at"] = now
    return reap_stale()
