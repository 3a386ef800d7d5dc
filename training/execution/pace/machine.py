"""The queue a run would join now, as the forecast sees it: the runs executing or queued and
how long a new one waits for a worker process (the launch form asks at every render)."""

from __future__ import annotations

from typing import Any

from core.worker_status import worker_status
from training import conf
from training.models import Run


def machine() -> dict[str, Any]:
    """Runs executing or queued now: how many, and about how long a new run waits for a
    worker process (seconds; ``untimed``: how many of the runs holding or waiting for every
    worker have no time to wait by, so the wait says less). The worker
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
    untimed = 0  # runs whose forecast has no time (their model's first): their end is unknown
    for _, used, stored in active:
        expected = ((stored or {}).get("seconds") or {}).get("expected")
        left.append(max(0.0, float(expected) - float(used or 0)) if expected else 0.0)
        untimed += not expected
    wait = 0.0
    busy = len(active) >= workers
    if busy:  # the earliest free worker process, one after another
        slots = sorted(left[:workers])
        for remaining in left[workers:]:
            slots[0] += remaining
            slots.sort()
        wait = slots[0]
    return {
        "running": running,
        "queued": queued,
        "workers": workers,
        "wait": wait,
        "untimed": untimed if busy else 0,
    }
