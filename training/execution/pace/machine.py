"""The machine a run would start on now, as the forecast sees it: the runs executing or queued,
the worker processes free for a new one, and what the other processes take of its cores.

The launch form's forecast asks this at every render (:func:`machine`); the time a local
model's run is expected to take follows the contention found here (:func:`contention_span`:
the one last measured while it is recent, else the load averages').
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from core.worker_status import worker_status
from training import conf
from training.execution.pace import cpu_meter
from training.forecasting.contention import LOAD_WINDOWS, Contention, ContentionSpan, load_share
from training.forecasting.pace import Pace
from training.models import Run


def machine(local: bool) -> dict[str, Any]:
    """Runs executing or queued now: how many, the share of the model's parallel calls a
    new run gets, and about how long it waits for a worker process (seconds). The worker
    processes are those of the workers alive now (their beats say their pool sizes), else,
    with none beating, TRAINBOARD_WORKER_CONCURRENCY."""
    workers = worker_status()["slots"] or max(1, int(conf.get("TRAINBOARD_WORKER_CONCURRENCY")))
    active = list(
        Run.objects.filter(status__in=Run.ACTIVE).values_list(
            "status", "active_seconds", "forecast"
        )[:50]
    )
    running = sum(1 for status, _, _ in active if status == Run.RUNNING)
    queued = len(active) - running
    left = []
    for _, used, stored in active:
        expected = ((stored or {}).get("seconds") or {}).get("expected")
        left.append(max(0.0, float(expected) - float(used or 0)) if expected else 0.0)
    wait = 0.0
    if len(active) >= workers:  # the earliest free worker process, one after another
        slots = sorted(left[:workers])
        for remaining in left[workers:]:
            slots[0] += remaining
            slots.sort()
        wait = slots[0]
    together = min(workers, len(active) + 1)
    found = {
        "running": running,
        "queued": queued,
        "workers": workers,
        "share": 1.0 / together if local else 1.0,
        "wait": wait,
    }
    if local:
        found["contention"] = contention_now()
    return found


#: Runs ended this long ago (seconds) still count in the load averages (the 15-minute one).
RECENT_RUNS_SECONDS = 3 * LOAD_WINDOWS[-1]


def contention_now() -> dict[str, Any] | None:
    """The other processes' demand on this machine's cores now (JSON: ``low``, ``expected``,
    ``high`` runnable threads, ``cores``, ``loads``: the load averages, ``own``: what this
    application's local runs count in each); None when the load cannot be read."""
    loads = cpu_meter.load_average()
    if not loads:
        return None
    cores = cpu_meter.cores()
    now = timezone.now()
    since = now - timedelta(seconds=RECENT_RUNS_SECONDS)
    rows = Run.objects.filter(Q(status=Run.RUNNING) | Q(finished_at__gte=since)).values_list(
        "status", "clock_started_at", "finished_at", "active_seconds", "forecast"
    )[:50]
    own = [0.0 for _ in LOAD_WINDOWS]
    for status, clock, finished, used, stored in rows:
        stored = stored or {}
        if not stored.get("local"):
            continue  # a provider's calls run elsewhere
        threads = min(float(cores), float(stored.get("batch_size") or 1))
        if status == Run.RUNNING:
            lasted = (now - clock).total_seconds() if clock else float(used or 0)
            ago = 0.0
        elif finished is not None:
            lasted, ago = float(used or 0), (now - finished).total_seconds()
        else:
            continue
        for index, window in enumerate(LOAD_WINDOWS):
            own[index] += load_share(threads, lasted, ago, window)
    span = ContentionSpan.from_loads(tuple(loads), tuple(own), cores)
    return {
        "low": span.low.others,
        "expected": span.expected.others,
        "high": span.high.others,
        "cores": cores,
        "loads": [round(v, 2) for v in loads],
        "own": [round(v, 2) for v in own],
    }


#: A contention measured this recently (seconds: by the model's calibration or its latest
#: run, ``Pace.contention_at``) is the one a forecast expects; the load averages bound it.
MEASURED_RECENTLY_SECONDS = 600.0


def contention_span(found: dict[str, Any] | None, pace: Pace) -> ContentionSpan | None:
    """The contention a local model's run is expected to meet: the one last measured on
    this machine while it is recent (what the other processes took while a run or the
    calibration competed with them: the load average counts processes waiting on disk and
    ones a lower priority keeps back, and over-stated it 1.5x in the bench), else the load
    averages'; the range spans both."""
    if not found:
        return None
    cores = int(found["cores"])
    low, expected, high = (float(found[k]) for k in ("low", "expected", "high"))
    at = pace.contention_at
    if pace.contention is not None and at is not None:
        if 0 <= time.time() - at <= MEASURED_RECENTLY_SECONDS:
            expected = float(pace.contention)
            found["measured"] = expected
            found["expected"] = expected
            low, high = min(low, expected), max(high, expected)
            found["low"], found["high"] = low, high
    return ContentionSpan(*(Contention(v, cores) for v in (low, expected, high)))
