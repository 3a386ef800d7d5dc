"""Is any Celery worker alive? Each worker beats in Redis; each web process reads the beats.

Every worker runs a :class:`Beacon` (a thread of its main process, started on
``worker_ready`` by ``project/celery.py``): every ``TRAINBOARD_WORKER_STATUS_TTL`` seconds it
writes the time under its name in one sorted set (:data:`BEACON_KEY`), and it removes its
name when it shuts down. Reading is one bounded Redis command (:func:`beating_workers`).

Why not ``app.control.ping``: a broadcast ping holds a broker connection and listens for
replies for its whole timeout. First, 200 parallel requests that each pinged emptied Celery's
connection pool; then, with one background ping at a time, a flood of requests starved the
web process enough that no reply was collected within the timeout, and ``/healthz`` said
``worker: down`` for a worker that was fine. A beat needs neither a reply nor the worker's
event loop.

The worker indicator and ``/healthz`` both read :func:`worker_status`, which never asks Redis
in the request: when the answer is older than ``TRAINBOARD_WORKER_STATUS_TTL`` seconds it
starts one background refresh (unless one is already running) and returns the answer it
has. A request waits, at most :data:`ANSWER_WAIT` seconds, for that refresh only when the
answer it has is too old to tell (none yet, or read more than :func:`max_age` seconds ago:
nobody asked for a while). Answering from such a read said "down" of a worker that beat all
along: a monitor asking every 30 s got 503 every time, and a fresh clone's first ``make
run`` said "starting", then "worker down" 30 s later while the worker was ready. A worker
counts as alive while it beat within :func:`max_age` seconds, so a stopped (or killed)
worker shows as down within ``max_age`` seconds.

A worker that has started but still loads its local models is "starting", not down: its
beacon starts on ``worker_init`` (before the pool forks, seconds after the process starts)
saying ``starting``, each pool process registers in :data:`LOADING_KEY` while it preloads
the models (:func:`loading_started` / :func:`loading_finished`, from ``project/celery.py``),
and the beat says ``ready`` once the worker is ready (``worker_ready``) and no pool process
of it is loading. ``/healthz`` answers 200 with ``worker: starting`` meanwhile, and the
header says "worker: starting (loading models)".
"""

from __future__ import annotations

import functools
import logging
import threading
import time

import redis
from django.conf import settings

from project.redis_config import COMMAND_TIMEOUT

logger = logging.getLogger(__name__)

#: The sorted set of beats: member = worker name, score = time of its last beat (epoch s).
BEACON_KEY = "trainboard:workers:beats"
#: Any Redis command of a beat or a read may take this long.
PING_TIMEOUT = 2.0
#: A request whose answer is too old to tell waits at most this long for a fresh read.
ANSWER_WAIT = PING_TIMEOUT + COMMAND_TIMEOUT
#: Beats older than this are removed by the beating workers (names of workers long gone).
FORGET_AFTER = 24 * 3600
#: What each beating worker last said it is: :data:`STARTING` or :data:`READY` (a hash).
STATES_KEY = "trainboard:workers:states"
#: How many runs each beating worker executes at once (its pool size; a hash).
SLOTS_KEY = "trainboard:workers:slots"
#: Per worker, its pool processes that are loading models (sorted set: pid -> since when).
LOADING_KEY = "trainboard:workers:loading:{worker}"
#: A pool process killed while loading never says it finished: it counts this long at most.
LOADING_AT_MOST = 600.0
STARTING = "starting"
READY = "ready"
#: Seconds between two beats of a starting worker.
STARTING_BEAT = 1.0
#: A worker whose last beat is older than :func:`max_age` but within this many seconds has
#: gone quiet (it died, or its machine did): the indicator names it beside those alive.
QUIET_WINDOW = 15 * 60

_lock = threading.Lock()  # guards the three names below
_read_done = threading.Condition(_lock)  # notified when a read finishes
_last_read: float | None = None  # when the last read finished (epoch seconds)
_last_seen: tuple[float, list[str]] | None = None  # when a read last found workers, and which
_refreshing = False
_broker_down = False  # the last read could not ask Redis
_quiet: list[str] = []  # workers the last read found gone quiet
# After a read that found no worker, read again this soon: recovery shows within seconds.
RETRY_WHEN_DOWN = 1.0


@functools.cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url, socket_timeout=PING_TIMEOUT, socket_connect_timeout=PING_TIMEOUT
    )


def read_beats() -> tuple[list[str], list[str]]:
    """(the workers that beat within :func:`max_age` seconds, those that beat within
    :data:`QUIET_WINDOW` but not since: gone without saying so, as a killed worker does; a
    worker that stops cleanly removes its name). Raises ``redis.RedisError`` when Redis
    cannot be asked within ``PING_TIMEOUT`` seconds: then nobody can tell."""
    now = time.time()
    beats = _client(settings.REDIS_URL).zrangebyscore(
        BEACON_KEY, now - QUIET_WINDOW, "+inf", withscores=True
    )
    alive = sorted(_text(name) for name, at in beats if at >= now - max_age())
    quiet = sorted(_text(name) for name, at in beats if at < now - max_age())
    return alive, quiet


def beating_workers() -> list[str]:
    """Names of the workers that beat within :func:`max_age` seconds ([] if none, or if
    Redis could not be asked within ``PING_TIMEOUT`` seconds)."""
    try:
        return read_beats()[0]
    except redis.RedisError as exc:  # Redis down or stalled: no worker can be reached either
        logger.warning("worker beats not read: %s: %s", type(exc).__name__, exc)
        return []


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def worker_slots(names: list[str]) -> int:
    """How many runs the workers ``names`` execute at once, together (a worker that never
    said counts 1; 0 for none). Raises ``redis.RedisError`` when Redis cannot be asked."""
    if not names:
        return 0
    found = _client(settings.REDIS_URL).hmget(SLOTS_KEY, names)
    return sum(int(value) if value else 1 for value in found)


def starting_workers(names: list[str]) -> list[str]:
    """Those of ``names`` whose last beat said :data:`STARTING` ([] if Redis could not be
    asked; a worker that never said, an older one, counts as ready)."""
    if not names:
        return []
    try:
        states = _client(settings.REDIS_URL).hmget(STATES_KEY, names)
    except redis.RedisError as exc:
        logger.warning("worker states not read: %s: %s", type(exc).__name__, exc)
        return []
    return [
        name
        for name, state in zip(names, states, strict=True)
        if state and _text(state) == STARTING
    ]


def _in_pool_process(command: str, *args) -> None:
    """One Redis command from a pool process, on a connection of its own: the process was
    forked from the worker's main one, whose beacon thread was using the shared client."""
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=PING_TIMEOUT, socket_connect_timeout=PING_TIMEOUT
    )
    try:
        getattr(client, command)(*args)
    except redis.RedisError as exc:
        logger.warning("model loading not noted (%s): %s: %s", command, type(exc).__name__, exc)
    finally:
        client.close()


def loading_started(worker: str, pid: int) -> None:
    """A pool process of ``worker`` starts loading the local models (the worker is
    "starting" until :func:`loading_finished`, or :data:`LOADING_AT_MOST` seconds)."""
    _in_pool_process("zadd", LOADING_KEY.format(worker=worker), {str(pid): time.time()})


def loading_finished(worker: str, pid: int) -> None:
    """That pool process has loaded its models (or failed to: the run says why)."""
    _in_pool_process("zrem", LOADING_KEY.format(worker=worker), str(pid))


class Beacon(threading.Thread):
    """A worker's proof of life: its name and the time, in :data:`BEACON_KEY`, every
    ``TRAINBOARD_WORKER_STATUS_TTL`` seconds until :meth:`stop` (which removes the name),
    and its state in :data:`STATES_KEY`: :data:`STARTING` until :meth:`mark_ready` and
    while a pool process of it loads models, :data:`READY` after.

    Args:
        name: the worker's name (``celery@host``), as the indicator lists it.
        slots: how many runs it executes at once (its pool size): the forecast's queue.

    Example:
        >>> beacon = Beacon("celery@host")
        >>> beacon.start()  # on worker_init: "starting"
        >>> starting_workers(beating_workers())
        ['celery@host']
        >>> beacon.mark_ready()  # on worker_ready, no model loading left: "ready"
        >>> beacon.stop()
    """

    def __init__(self, name: str, slots: int = 1):
        super().__init__(name="worker-beacon", daemon=True)
        self.worker = name
        self.slots = max(1, int(slots))
        self.stopped = threading.Event()
        self.ready = threading.Event()
        self.last_state = STARTING

    def state(self, client: redis.Redis, now: float) -> str:
        """:data:`READY` once marked ready with no pool process of it loading models."""
        if not self.ready.is_set():
            return STARTING
        loading = client.zcount(
            LOADING_KEY.format(worker=self.worker), now - LOADING_AT_MOST, "+inf"
        )
        return STARTING if loading else READY

    def beat(self) -> None:
        now = time.time()
        try:
            client = _client(settings.REDIS_URL)
            state = self.last_state = self.state(client, now)
            with client.pipeline(transaction=False) as pipe:
                pipe.zadd(BEACON_KEY, {self.worker: now})
                pipe.hset(STATES_KEY, self.worker, state)
                pipe.hset(SLOTS_KEY, self.worker, self.slots)
                pipe.zremrangebyscore(BEACON_KEY, "-inf", now - FORGET_AFTER)
                pipe.execute()
        except redis.RedisError as exc:  # the next beat tries again
            logger.warning("worker beat not written: %s: %s", type(exc).__name__, exc)

    def start(self) -> None:
        """Beat once before returning (the worker shows alive at once), then from the thread."""
        self.beat()
        super().start()

    def run(self) -> None:
        while not self.stopped.wait(self._period()):
            try:
                self.beat()
            except Exception:  # anything but Redis (beat() handles it): the thread must live,
                # or a worker that is alive reads "down" from max_age() on
                logger.exception("worker beat failed; the next one tries again")

    def _period(self) -> float:
        """Every TTL; while starting, every :data:`STARTING_BEAT` s, so "ready" shows soon."""
        ttl = settings.TRAINBOARD_WORKER_STATUS_TTL
        return ttl if self.last_state == READY else min(ttl, STARTING_BEAT)

    def mark_ready(self) -> None:
        """The worker consumes tasks (``worker_ready``): "ready" from the next beat on, once
        no pool process of it loads models. Beats at once."""
        self.ready.set()
        self.beat()

    def stop(self) -> None:
        """Stop beating and remove the name: a stopped worker shows as down at the next read."""
        self.stopped.set()
        self.join(timeout=2 * PING_TIMEOUT)
        try:
            with _client(settings.REDIS_URL).pipeline(transaction=False) as pipe:
                pipe.zrem(BEACON_KEY, self.worker)
                pipe.hdel(STATES_KEY, self.worker)
                pipe.hdel(SLOTS_KEY, self.worker)
                pipe.execute()
        except redis.RedisError as exc:
            logger.warning("worker beat not removed (%s); it goes stale by itself", exc)


def max_age() -> float:
    """Seconds a worker's beat counts: two beat periods plus one Redis timeout."""
    return 2 * settings.TRAINBOARD_WORKER_STATUS_TTL + PING_TIMEOUT


def _refresh() -> None:
    """Read the beats once, for every request that waits on this read.

    Whatever the read raises (a Redis error is already a read of no worker; a malformed
    ``REDIS_URL`` raises ValueError), the read counts as done and the waiters are woken: a
    request never waits :data:`ANSWER_WAIT` on a read that died.
    """
    global _last_read, _last_seen, _refreshing, _broker_down, _quiet
    workers: list[str] = []
    quiet: list[str] = []
    starting: list[str] = []
    slots = 0
    broker_down = False
    try:
        workers, quiet = read_beats()
        starting = starting_workers(workers)
        slots = worker_slots(workers)
    except redis.RedisError as exc:  # the broker is away: whether workers run is unknown
        logger.warning("worker beats not read: %s: %s", type(exc).__name__, exc)
        broker_down = True
    except Exception:
        logger.exception("worker beats not read; the status reads no worker")
        workers, starting = [], []
    finally:
        with _lock:
            _last_read = time.time()
            _broker_down, _quiet = broker_down, quiet
            if workers:
                _last_seen = (_last_read, workers, starting, slots)
            _refreshing = False
            _read_done.notify_all()


def _start_refresh_if_stale() -> None:
    global _refreshing
    with _lock:
        # A worker ready to take runs: read again every TTL; none (or only starting ones):
        # again within a second, so a recovery or the end of a start shows at once.
        found = _last_seen is not None and _last_seen[0] == _last_read
        ready = found and len(_last_seen[2]) < len(_last_seen[1])
        period = settings.TRAINBOARD_WORKER_STATUS_TTL if ready else RETRY_WHEN_DOWN
        fresh = _last_read and time.time() - _last_read < period
        if fresh or _refreshing:
            return
        _refreshing = True
    threading.Thread(target=_refresh, name="worker-status-read", daemon=True).start()


def worker_status() -> dict:
    """The shared answer: ``{"state", "alive", "starting", "workers", "slots", "quiet",
    "broker_down", "checked_at"}``.

    Returns:
        ``state``: "alive" when a worker that beat within :func:`max_age` seconds is ready
        to take runs, "starting" when the workers that beat all still load their models,
        "unknown" when Redis (the broker the beats live in) cannot be asked: the workers may
        well be working, and "down" when none beat. ``alive`` and ``starting`` say the same
        as booleans; ``workers`` are those that beat, ``slots`` how many runs they execute
        at once together (their pool sizes); ``quiet`` those that stopped beating
        within :data:`QUIET_WINDOW` without saying goodbye; ``checked_at`` is when the last
        read finished (None: none yet).

    Example:
        >>> worker_status()["state"]
        'alive'
    """
    _start_refresh_if_stale()
    deadline = time.monotonic() + ANSWER_WAIT
    with _read_done:
        # Too old to tell (see the module docstring): wait for the refresh just started.
        while _last_read is None or time.time() - _last_read > max_age():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            _read_done.wait(left)
        last_read, last_seen = _last_read, _last_seen
        broker_down, quiet = _broker_down, list(_quiet)
    slots = 0
    if broker_down:
        state, workers = "unknown", []
    elif last_seen is None or time.time() - last_seen[0] > max_age():
        state, workers = "down", []
    else:
        _, workers, starting, slots = last_seen
        state = "starting" if len(starting) == len(workers) else "alive"
    return {
        "state": state,
        "alive": state == "alive",
        "starting": state == "starting",
        "workers": workers,
        "slots": slots,
        "quiet": [name for name in quiet if name not in workers],
        "broker_down": broker_down,
        "checked_at": last_read,
    }


def forget() -> None:
    """Drop what is known (the next call reads again); a running refresh still lands."""
    global _last_read, _last_seen, _broker_down, _quiet
    with _lock:
        _last_read = _last_seen = None
        _broker_down, _quiet = False, []
