"""Is any Celery worker alive? One cached answer per process, refreshed by one ping at a time.

Why: a broadcast ping holds a broker connection for its whole timeout. When every request
pinged (``/healthz`` did), 200 parallel requests emptied Celery's connection pool and every
later ping, health check and launch blocked on it for good. Now the worker indicator and
``/healthz`` both read :func:`worker_status`, which never pings in the request: when the
answer is older than ``TRAINBOARD_WORKER_STATUS_TTL`` seconds it starts one background
refresh (unless one is already running) and returns the answer it has. Only the very first
request of a process waits, at most :data:`FIRST_ANSWER_WAIT` seconds, for the first ping.

A worker counts as alive while one answered a ping within :func:`max_age` seconds: one ping
that no worker answered in time (a busy worker on a loaded machine) does not flip health to
down and back, and a worker that stopped shows as down within ``max_age`` seconds.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

from project.redis_config import COMMAND_TIMEOUT

logger = logging.getLogger(__name__)

PING_TIMEOUT = 2.0
# A ping is a publish plus PING_TIMEOUT of listening: this bounds the first request's wait.
FIRST_ANSWER_WAIT = PING_TIMEOUT + COMMAND_TIMEOUT

_lock = threading.Lock()  # guards the three names below
_first_answer = threading.Event()
_last_ping: float | None = None  # when the last ping finished (epoch seconds)
_last_seen: tuple[float, list[str]] | None = None  # when workers last answered, and which
_refreshing = False
# After a ping that found no worker, ask again this soon: recovery shows within seconds.
RETRY_WHEN_DOWN = 1.0


def ping_workers(timeout: float = PING_TIMEOUT) -> list[str]:
    """Names of the workers that answered a ping within ``timeout`` seconds ([] if none)."""
    from project.celery import app

    try:
        replies = app.control.ping(timeout=timeout) or []
    except Exception as exc:  # broker down or stalled: no worker can be reached either
        logger.warning("worker ping failed: %s: %s", type(exc).__name__, exc)
        return []
    return sorted(name for reply in replies for name in reply)


def max_age() -> float:
    """Seconds a worker's answer counts: two refresh periods plus one ping."""
    return 2 * settings.TRAINBOARD_WORKER_STATUS_TTL + PING_TIMEOUT


def _refresh() -> None:
    global _last_ping, _last_seen, _refreshing
    try:
        workers = ping_workers()
        with _lock:
            _last_ping = time.time()
            if workers:
                _last_seen = (_last_ping, workers)
        _first_answer.set()
    finally:
        with _lock:
            _refreshing = False


def _start_refresh_if_stale() -> None:
    global _refreshing
    with _lock:
        found = _last_seen is not None and _last_seen[0] == _last_ping
        period = settings.TRAINBOARD_WORKER_STATUS_TTL if found else RETRY_WHEN_DOWN
        fresh = _last_ping and time.time() - _last_ping < period
        if fresh or _refreshing:
            return
        _refreshing = True
    threading.Thread(target=_refresh, name="worker-status-ping", daemon=True).start()


def worker_status() -> dict:
    """The shared answer: ``{"alive": bool, "workers": [...], "checked_at": epoch s or None}``.

    Returns:
        ``alive`` when a worker answered a ping within :func:`max_age` seconds, with the
        workers that answered; ``checked_at`` is when the last ping finished (None: none yet).

    Example:
        >>> worker_status()["alive"]
        True
    """
    _start_refresh_if_stale()
    if not _first_answer.is_set():
        _first_answer.wait(FIRST_ANSWER_WAIT)
    with _lock:
        last_ping, last_seen = _last_ping, _last_seen
    if last_seen is None or time.time() - last_seen[0] > max_age():
        return {"alive": False, "workers": [], "checked_at": last_ping}
    return {"alive": True, "workers": last_seen[1], "checked_at": last_ping}


def forget() -> None:
    """Drop what is known (the next call pings again); a running refresh still lands."""
    global _last_ping, _last_seen
    with _lock:
        _last_ping = _last_seen = None
    _first_answer.clear()
