"""Health checks for /healthz: each gives None when up or a short reason when down.

Every check is bounded by :data:`TIMEOUT`, and the two Redis checks run concurrently, so
``/healthz`` answers within about ``TIMEOUT`` seconds even when Redis is stalled (503 then).

The channel-layer check sends a message to itself through a channel layer instance of its
own, on its own event loop and connections, never the process's shared layer: on that one
the open run pages' sockets are receiving, and a second event loop receiving on it made the
check fail for as long as any run page was open. The worker check reads the cached status
the worker indicator shows (:mod:`core.worker_status`): a request never pings. A worker
that is still loading its models is "starting": 200, not 503 (:func:`report`).

Checks run one evaluation at a time per process, and requests that arrive within
:data:`REUSE_SECONDS` of an evaluation share its result: 200 parallel monitors cost one
database connection and two Redis connections, not 200 of each (PostgreSQL refused
connections beyond its limit and /healthz said ``database: down``).
"""

from __future__ import annotations

import asyncio
import threading
import time

import redis.asyncio
from channels.layers import channel_layers
from django.conf import settings
from django.db import connection

from core.worker_status import worker_status

TIMEOUT = 2.0
REUSE_SECONDS = 1.0
#: The worker check's answer while the worker loads its models: neither up nor down.
STARTING = "starting"
#: The worker check's answer while the broker is down: the workers' beats live in Redis, so
#: whether they run cannot be told (the broker's own check says "down").
UNKNOWN = "unknown"

_evaluating = threading.Lock()
_last: tuple[float, dict[str, str | None]] | None = None  # (monotonic time, results)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {TIMEOUT:g} s"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return _reason(exc)
    return None


async def _ping_broker() -> None:
    client = redis.asyncio.Redis.from_url(
        settings.REDIS_URL, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT
    )
    try:
        await client.ping()
    finally:
        await client.aclose()


async def _channel_layer_round_trip() -> None:
    layer = channel_layers.make_backend("default")  # private: see the module docstring
    try:
        channel = await layer.new_channel("healthz.")
        await layer.send(channel, {"type": "healthz.ping"})
        message = await layer.receive(channel)
        if message.get("type") != "healthz.ping":
            raise RuntimeError(f"unexpected message {message!r}")
    finally:
        await layer.close_pools()


async def _bounded(check) -> str | None:
    try:
        await asyncio.wait_for(check(), TIMEOUT)
    except Exception as exc:  # any failure is "down", with its reason
        return _reason(exc)
    return None


async def _redis_checks() -> tuple[str | None, str | None]:
    broker, layer = await asyncio.gather(
        _bounded(_ping_broker), _bounded(_channel_layer_round_trip)
    )
    return broker, layer


def check_redis() -> dict[str, str | None]:
    """The broker and channel-layer checks, concurrently, on an event loop of their own."""
    broker, layer = asyncio.run(_redis_checks())
    return {"broker": broker, "channel_layer": layer}


def check_worker() -> str | None:
    """None when a worker is ready, :data:`STARTING` while the workers load their models
    (not down: runs queue and start once the models are in memory), else why it is down."""
    state = worker_status()["state"]
    if state == "starting":
        return STARTING
    if state == "unknown":
        return UNKNOWN
    return None if state == "alive" else "no Celery worker beat recently"


def report(results: dict[str, str | None]) -> tuple[dict[str, object], int]:
    """``/healthz``'s body and status code for :func:`run_checks`' results.

    Returns:
        ``({"database": "up", ..., "worker": "up" | "starting" | "unknown" | "down",
        "status": ..., "down": [...] when any}, 200 or 503)``. A starting worker is not
        down: 200, ``"status": "starting"``. A worker whose state cannot be told (the broker
        is down, which makes it 503) is "unknown", not listed as down.
    """
    told = {None, STARTING, UNKNOWN}
    down = sorted(name for name, problem in results.items() if problem not in told)
    body: dict[str, object] = {
        name: "up" if not problem else problem if problem in (STARTING, UNKNOWN) else "down"
        for name, problem in results.items()
    }
    starting = any(problem == STARTING for problem in results.values())
    body["status"] = "down" if down else "starting" if starting else "up"
    if down:
        body["down"] = down
    return body, 503 if down else 200


def _evaluate() -> dict[str, str | None]:
    return {"database": check_database(), **check_redis(), "worker": check_worker()}


def _recent() -> dict[str, str | None] | None:
    if _last is not None and time.monotonic() - _last[0] < REUSE_SECONDS:
        return _last[1]
    return None


def run_checks() -> dict[str, str | None]:
    """{"database", "broker", "channel_layer", "worker"} -> None (up) or why it is down.

    Waits for an evaluation in progress (at most about two TIMEOUTs) and reuses its result.
    """
    global _last
    if not _evaluating.acquire(timeout=2 * TIMEOUT + 1):
        return _recent() or _evaluate()  # an evaluation is stuck: do not queue behind it
    try:
        results = _recent()
        if results is None:
            results = _evaluate()
            _last = (time.monotonic(), results)
        return results
    finally:
        _evaluating.release()


def forget() -> None:
    """Drop the reusable result: the next request evaluates the checks afresh."""
    global _last
    _last = None
