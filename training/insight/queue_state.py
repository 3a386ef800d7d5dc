"""Why a queued run waits: the workers' state, the runs they hold, its place in the queue.

Why: a queued run's page said "Queued · Not started yet." for minutes while two other runs
held both workers. A person needs to know it is waiting its turn (and behind
what), or that no worker is running at all.

Example:
    >>> queue_state(run)
    {'position': 2, 'ahead': 1, 'running': [...], 'running_count': 2, 'workers': 1, 'worker_alive': True}
"""

from __future__ import annotations

from typing import Any

from core.worker_status import worker_status
from training.models import Run

#: Runs a queued run's page names as holding the workers (the owner's own; others counted).
RUNNING_NAMED = 5


def queue_state(run: Run) -> dict[str, Any]:
    """What a queued run waits for (read-only; the worker takes runs in launch order).

    Returns:
        ``position`` (1: next to start), ``ahead`` (queued runs launched before it),
        ``running`` (the owner's running runs, at most ``RUNNING_NAMED``), ``running_count``
        (every running run), ``workers``, ``broker_down`` (Redis cannot be asked: whether a
        worker runs is unknown), ``worker_alive`` and ``worker_starting`` (a worker
        that still loads its models; ``core.worker_status``, the header's and ``/healthz``'s
        one source).
    """
    queued = Run.objects.filter(status=Run.QUEUED).order_by()
    ahead = (
        queued.filter(created__lt=run.created).count()
        + queued.filter(created=run.created, pk__lt=run.pk).count()
    )
    running = Run.objects.filter(status=Run.RUNNING).order_by("started_at", "pk")
    status = worker_status()
    return {
        "position": ahead + 1,
        "ahead": ahead,
        "running": list(running.filter(owner_id=run.owner_id)[:RUNNING_NAMED]),
        "running_count": running.count(),
        "workers": len(status["workers"]),
        "worker_alive": status["alive"],
        "worker_starting": status["starting"],
        "broker_down": status["broker_down"],
    }
