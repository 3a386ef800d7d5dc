"""Is any Celery worker alive? One cached answer per process, refreshed by one ping at a time.

Why: a broadcast ping holds a broker connection for its whole timeout. When every request
pinged (``/healthz`` did), 200 parallel requests emptied Celery's connection pool and every
later ping, health check and launch blocked on it for good. Now the worker indicator and
``/healthz`` both read :func:`worker_status`, which never pings in the request: when the
answer is older than ``TRAINBOARD_WORKER_STATUS_TTL`` seconds it starts one background
refresh (unless one is already running) and returns the answer it has. Only the very first
request of a process waits, at most :data:`FIRST_ANSWER_WAIT` seconds, for the first ping.

An answer older than :func:`max_age` (a refresh that is stuck, e.g. on a stalled Redis) is
reported as down rather than trusted.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

from project.redis_config import COMMAND_TIMEOUT

logger = logging.getLogger(__name__)

PING_TIMEOUT = 1.0
# A ping is a publish plus PING_TIMEOUT of listening: this bounds the first request's wait.
FIRST_ANSWER_WAIT = PING_TIMEOUT + COMMAND_TIMEOUT

_lock = threading.Lock()  # guards _answer and _refreshing
_first_answer = threading.Event()
_answer: dict | None = None
_refreshing = False


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
    """Seconds after which a cached answer is no longer believed."""
    return settings.TRAINBOARD_WORKER_STATUS_TTL + FIRST_ANSWER_WAIT + PING_TIMEOUT


def _refresh() -> None:
    global _answer, _refreshing
    try:
        workers = ping_workers()
        answer = {"alive": bool(workers), "workers": workers, "checked_at": time.time()}
        with _lock:
            _answer = answer
        _first_answer.set()
    finally:
        with _lock:
            _refreshing = False


def _start_refresh_if_stale() -> None:
    global _refreshing
    with _lock:
        fresh = _answer and time.time() - _answer["checked_at"] < (
            settings.TRAINBOARD_WORKER_STATUS_TTL
        )
        if fresh or _refreshing:
            return
        _refreshing = True
    threading.Thread(target=_refresh, name="worker-status-ping", daemon=True).start()


def worker_status() -> dict:
    """The shared answer: ``{"alive": bool, "workers": [...], "checked_at": epoch s or None}``.

    Returns:
        The latest ping's answer; ``alive`` is False when no worker answered, when no ping
        has finished yet, or when the last answer is older than :func:`max_age`.

    Example:
        >>> worker_status()["alive"]
        True
    """
    _start_refresh_if_stale()
    if not _first_answer.is_set():
        _first_answer.wait(FIRST_ANSWER_WAIT)
    with _lock:
        answer = _answer
    if answer is None:
        return {"alive": False, "workers": [], "checked_at": None}
    if time.time() - answer["checked_at"] > max_age():
        return {"alive": False, "workers": [], "checked_at": answer["checked_at"]}
    return answer


def forget() -> None:
    """Drop the cached answer (the next call pings again); a running refresh still lands."""
    global _answer
    with _lock:
        _answer = None
    _first_answer.clear()
