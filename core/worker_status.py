"""Is any Celery worker alive? A broadcast ping with a short timeout, cached briefly.

Cached per process for TRAINBOARD_WORKER_STATUS_TTL seconds so that many open pages
polling the indicator cost one ping, not one each.
"""

import time

from django.conf import settings
from django.core.cache import cache

CACHE_KEY = "core:worker-status"


def ping_workers(timeout: float = 1.0) -> list[str]:
    """Names of the workers that answered a ping within ``timeout`` seconds ([] if none)."""
    from project.celery import app

    try:
        replies = app.control.ping(timeout=timeout) or []
    except Exception:  # broker down: no worker can be reached either
        return []
    return sorted(name for reply in replies for name in reply)


def worker_status(timeout: float = 1.0) -> dict:
    """{"alive": bool, "workers": [...], "checked_at": epoch seconds}, cached."""
    status = cache.get(CACHE_KEY)
    if status is None:
        workers = ping_workers(timeout)
        status = {"alive": bool(workers), "workers": workers, "checked_at": time.time()}
        cache.set(CACHE_KEY, status, settings.TRAINBOARD_WORKER_STATUS_TTL)
    return status
