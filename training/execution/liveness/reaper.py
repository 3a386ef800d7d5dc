"""Marking runs whose worker died as "failed: worker lost".

A running run's heartbeat is refreshed every few seconds by its worker (see execution), in
the database and as a Redis pulse (see pulse); a run is lost only when both are stale.
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
from collections.abc import Callable
from datetime import datetime, timedelta

import redis
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Concat
from django.utils import timezone

from training import conf
from training.execution import events, run_state
from training.execution.liveness import pulse
from training.execution.sending import enqueue
from training.models import Run

logger = logging.getLogger(__name__)


def stale_after() -> float:
    return float(conf.get("TRAINBOARD_HEARTBEAT_STALE_SECONDS"))


def mark_worker_lost(
    run_id: int, detail: str, attempt: int | None = None, beat_before: datetime | None = None
) -> bool:
    """Fail a running run because its worker is gone; True if this call changed it.

    With ``beat_before``, only while its heartbeat is still older than that: a heartbeat
    written since the reaper read the row (it waited for the lock) keeps the run alive.
    """
    query = Run.objects.filter(pk=run_id, status=Run.RUNNING)
    if attempt is not None:
        query = query.filter(attempt=attempt)
    if beat_before is not None:
        query = query.filter(stale_beat(beat_before))
    now = timezone.now()
    changed = query.update(
        status=Run.FAILED,
        error=f"failed: worker lost ({detail}). Resume continues from the last completed epoch.",
        finished_at=now,
        phase="",
    )
    if changed:
        logger.warning("run %s: worker lost (%s)", run_id, detail)
        resume_without_a_person(run_id)
        try:
            events.run_row_changed(run_id)
        except Exception:  # the page still shows it on reload; never fail the reaper on this
            logger.exception("run %s: could not broadcast the worker-lost status", run_id)
    return bool(changed)


def resume_without_a_person(run_id: int) -> bool:
    """Queue a run just lost to a dead worker again, from its checkpoint (from the start when
    it has none yet: its partial epoch is dropped, ``run_state.drop_unfinished_epochs``),
    unless it has been resumed so TRAINBOARD_AUTO_RESUMES times already (a run that kills its
    worker each time must not loop); True if it was queued. Its page says so
    (``Run.auto_resumes``); past the bound the failure says why nothing resumed it."""
    limit = int(conf.get("TRAINBOARD_AUTO_RESUMES"))
    lost = Run.objects.filter(pk=run_id, status=Run.FAILED)
    with transaction.atomic():
        changed = lost.filter(auto_resumes__lt=limit).update(
            **run_state.resumed(auto_resumes=F("auto_resumes") + 1)
        )
        if changed:
            run = Run.objects.get(pk=run_id)
            enqueue(run)
            logger.warning(
                "run %s: resumed without a person (%s of %s)",
                run_id,
                run.auto_resumes,
                limit,
            )
            return True
    if limit and lost.filter(auto_resumes__gte=limit).exists():
        lost.update(
            error=Concat(
                "error",
                Value(
                    f" It was resumed without a person {limit} time{'s' if limit > 1 else ''} "
                    "already (TRAINBOARD_AUTO_RESUMES), so it waits for you this time."
                ),
            )
        )
    return False


def stale_beat(cutoff: datetime) -> Q:
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)


def reap_stale(worker: str | None = None) -> list[int]:
    """Fail running runs whose worker is gone (or, with ``worker``, all runs it held).

    Gone means both proofs of life are stale: the database heartbeat and the Redis pulse
    (see ``pulse``). The database one alone is not enough: on SQLite a live worker's
    heartbeat write can wait behind another writer's lock for longer than the stale limit.
    When Redis cannot be asked, no stale run is failed this pass (unknown is not lost).
    """
    cutoff = timezone.now() - timedelta(seconds=stale_after())
    condition = stale_beat(cutoff)
    if worker:
        condition |= Q(worker=worker)
    found = list(
        Run.objects.filter(condition, status=Run.RUNNING)
        .exclude(source=Run.CODE)
        .values_list("pk", "attempt", "heartbeat_at", "worker")
    )
    restarted = [row for row in found if worker and row[3] == worker]
    stale = [row for row in found if row not in restarted]
    try:
        beating = pulse.alive(
            ((run_id, attempt) for run_id, attempt, _, _ in stale), since=cutoff.timestamp()
        )
    except redis.RedisError as exc:
        ids = [row[0] for row in stale]
        logger.warning("runs %s: pulse unknown (%s); none failed this pass", ids, exc)
        stale = []
    else:
        stale = [row for row in stale if (row[0], row[1]) not in beating]
    reaped = []
    for run_id, attempt, _, _ in restarted:
        if mark_worker_lost(run_id, f"worker {worker} restarted", attempt):
            reaped.append(run_id)
    for run_id, attempt, beat, _ in stale:
        age = (
            f"no heartbeat for {(timezone.now() - beat).total_seconds():.0f} s"
            if beat
            else "no heartbeat"
        )
        if mark_worker_lost(run_id, age, attempt, beat_before=cutoff):
            reaped.append(run_id)
    return reaped


def reap_quiet_code_runs() -> list[int]:
    """Fail running runs from code that sent nothing for TRAINBOARD_CODE_RUN_QUIET_SECONDS:
    the code that ran the fit stopped (a closed notebook, a killed script). Never resumed
    here: the program's state is in that code, and only it can run the fit again."""
    quiet = float(conf.get("TRAINBOARD_CODE_RUN_QUIET_SECONDS"))
    cutoff = timezone.now() - timedelta(seconds=quiet)
    failed = []
    for run_id in Run.objects.filter(
        stale_beat(cutoff), status=Run.RUNNING, source=Run.CODE
    ).values_list("pk", flat=True):
        changed = (
            Run.objects.filter(pk=run_id, status=Run.RUNNING)
            .filter(stale_beat(cutoff))
            .update(
                status=Run.FAILED,
                error=(
                    f"failed: the code running this fit sent nothing for {quiet / 60:.0f} min "
                    "(it stopped, or lost its connection). A run from code is not resumed "
                    "here: run the fit again in your code."
                ),
                finished_at=timezone.now(),
                phase="",
            )
        )
        if changed:
            failed.append(run_id)
            events.run_row_changed(run_id)
    return failed


def reap_forever(
    every: float,
    stop: threading.Event | None = None,
    iterations: int | None = None,
    also: Callable[[], object] | None = None,
) -> list[int]:
    """Reap now, then every ``every`` seconds until ``stop`` is set (or ``iterations`` passes).

    ``also`` runs after each pass's reaping, under the same retry rule (the command passes
    ``forgotten_runs.ForgottenRuns().send_again``: queued runs whose message the broker lost).

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
                quiet = reap_quiet_code_runs()
                if quiet:
                    logger.warning(
                        "marked runs from code %s as failed: their code went quiet", quiet
                    )
                reaped += found + quiet
                if also is not None:
                    also()
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
