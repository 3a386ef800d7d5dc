"""/healthz while pages are open and Redis misbehaves (in-process, real Redis).

* An open run page (a consumer receiving on the process's channel layer) must not make the
  channel-layer check fail.
* A stalled Redis (SIGSTOP on a private server) must give a 503 within the health timeout.
"""

from __future__ import annotations

import threading
import time

import pytest

from core import health, worker_status
from tests.private_redis import private_redis_fixture  # noqa: F401  (fixture "private_redis")
from tests.support.consumers import open_echo_socket
from tests.support.waiting import until


@pytest.fixture
def a_worker_answers(monkeypatch):
    """The cached worker status says alive (no Celery worker runs in-process)."""
    monkeypatch.setattr(worker_status, "read_beats", lambda: (["w@test"], []))
    worker_status.forget()
    health.forget()
    yield
    worker_status.forget()
    health.forget()


@pytest.mark.django_db(transaction=True)
async def test_healthz_stays_up_while_a_socket_receives_on_the_channel_layer(
    async_client, a_worker_answers
):
    page, _ = await open_echo_socket(7)
    try:
        for _ in range(3):
            response = await async_client.get("/healthz")
            assert response.json()["channel_layer"] == "up"
            assert response.status_code == 200
        # The socket still works after the checks.
        await page.send_json_to({"still": "here"})
        assert await page.receive_json_from(timeout=5) == {"echo": {"still": "here"}}
    finally:
        await page.disconnect()


@pytest.mark.django_db(transaction=True)
def test_healthz_answers_503_in_time_when_redis_is_stalled(
    client, settings, private_redis, a_worker_answers
):
    for name, value in private_redis.settings().items():
        setattr(settings, name, value)
    assert client.get("/healthz").status_code == 200
    private_redis.stall()
    health.forget()  # a result up to REUSE_SECONDS old would be served again
    started = time.monotonic()
    response = client.get("/healthz")
    elapsed = time.monotonic() - started
    assert response.status_code == 503
    body = response.json()
    assert body["broker"] == "down" and body["channel_layer"] == "down"
    assert body["database"] == "up"
    assert elapsed < health.TIMEOUT + 1.0, f"/healthz took {elapsed:.1f} s during a stall"
    private_redis.resume()
    health.forget()
    assert client.get("/healthz").status_code == 200


def test_a_worker_beacon_shows_the_worker_until_it_stops(settings):
    """What a Celery worker starts on ``worker_ready`` (project/celery.py), on the real Redis:
    its beat makes it alive at once, and stopping removes it at once (no reply to wait for)."""
    settings.TRAINBOARD_WORKER_STATUS_TTL = 0.2
    name = f"beacon-test-{time.time_ns()}@test"
    beacon = worker_status.Beacon(name)
    beacon.start()
    try:
        assert name in worker_status.beating_workers()
        time.sleep(3 * settings.TRAINBOARD_WORKER_STATUS_TTL)  # it keeps beating
        assert name in worker_status.beating_workers()
    finally:
        beacon.stop()
    assert name not in worker_status.beating_workers()
    assert not beacon.is_alive()


def test_a_beat_older_than_the_limit_does_not_count(settings):
    """A killed worker never removes its name: its last beat ages out after max_age()."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    name = f"killed-{time.time_ns()}@test"
    client.zadd(worker_status.BEACON_KEY, {name: time.time() - worker_status.max_age() - 1})
    try:
        assert name not in worker_status.beating_workers()
    finally:
        client.zrem(worker_status.BEACON_KEY, name)


class _StandInWorker:
    """What Celery's ``worker_init`` sends (the WorkController): its name, and an app of its
    own, so that Celery's Django fixup leaves the test process alone (it skips workers of
    other apps)."""

    def __init__(self, hostname: str):
        from celery import Celery

        self.hostname = hostname
        # nor the current app: the tests after this one publish through the project's app
        self.app = Celery("stand-in", fixups=[], set_as_current=False)


def _until(read, expected, timeout: float = 10.0) -> None:
    """Return once ``read()`` gives ``expected`` (fails with the last value read)."""
    last = []
    until(
        lambda: last.append(read()) or last[-1] == expected,
        timeout,
        lambda: f"{expected}, not {last[-1]}",
    )


@pytest.mark.django_db(transaction=True)
def test_a_worker_loading_its_models_is_starting_not_down(user_client, settings, private_redis):
    """From ``worker_init`` on (seconds after the worker process starts, before the pool
    forks), the worker beats "starting": /healthz answers 200 "worker: starting" and the
    header says so, not 503 "worker down", while its pool processes load the models; once
    ready with the models loaded it is "up"; after shutdown "down". The real Celery signals
    and the receivers in project/celery.py, on a real (private) Redis."""
    from celery.signals import worker_init, worker_ready, worker_shutdown

    import project.celery  # noqa: F401  (connects the receivers)

    for name, value in private_redis.settings().items():
        setattr(settings, name, value)
    settings.TRAINBOARD_WORKER_STATUS_TTL = 0.5
    worker_status.forget()
    health.forget()

    def healthz():
        health.forget()
        response = user_client.get("/healthz")
        return response.status_code, response.json()["worker"], response.json()["status"]

    def indicator():
        return user_client.get("/status/worker/", headers={"HX-Request": "true"}).content.decode()

    name = f"starting-{time.time_ns()}@test"
    try:
        worker_init.send(sender=_StandInWorker(name))
        _until(healthz, (200, "starting", "starting"))
        assert "worker: starting (loading models)" in indicator()
        assert 'data-state="starting"' in indicator()

        worker_status.loading_started(name, 4242)  # a pool process preloads the models
        worker_ready.send(sender=None)
        time.sleep(3 * settings.TRAINBOARD_WORKER_STATUS_TTL)  # beats go on meanwhile
        assert healthz() == (200, "starting", "starting")

        worker_status.loading_finished(name, 4242)
        _until(healthz, (200, "up", "up"))
        assert "worker: alive" in indicator()
    finally:
        worker_shutdown.send(sender=None)
    _until(healthz, (503, "down", "down"))
    assert "worker: not running" in indicator()
    worker_status.forget()
    health.forget()


def test_a_pool_process_killed_while_loading_stops_counting_after_the_bound(settings, monkeypatch):
    """A killed pool process never says it finished: its entry counts LOADING_AT_MOST s."""
    import redis

    name = f"killed-loader-{time.time_ns()}@test"
    client = redis.Redis.from_url(settings.REDIS_URL)
    key = worker_status.LOADING_KEY.format(worker=name)
    beacon = worker_status.Beacon(name)
    beacon.ready.set()
    try:
        client.zadd(key, {"999": time.time() - worker_status.LOADING_AT_MOST - 1})
        assert beacon.state(client, time.time()) == worker_status.READY
        worker_status.loading_started(name, 1000)
        assert beacon.state(client, time.time()) == worker_status.STARTING
    finally:
        client.delete(key)


@pytest.mark.django_db
def test_a_worker_that_beat_all_along_is_up_when_nobody_asked_for_longer_than_max_age(
    client, settings
):
    """A monitor that asks /healthz less often than every max_age() seconds (every 30 s): the
    worker beat all along, so it is up, not "down" from the answer the web process read at
    the previous request (a fresh clone's first ``make run`` said "starting", then 503
    "worker down" 30 s later, of a worker that was ready). The real beacon, on the real Redis."""
    settings.TRAINBOARD_WORKER_STATUS_TTL = 0.2
    name = f"quiet-monitor-{time.time_ns()}@test"
    beacon = worker_status.Beacon(name)
    beacon.start()
    beacon.mark_ready()
    worker_status.forget()
    health.forget()
    try:
        first = client.get("/healthz")
        assert (first.status_code, first.json()["worker"]) == (200, "up")
        time.sleep(worker_status.max_age() + 1)  # nobody asks; the worker beats meanwhile
        health.forget()
        later = client.get("/healthz")
        assert (later.status_code, later.json()["worker"]) == (200, "up"), later.json()
        assert name in worker_status.worker_status()["workers"]
    finally:
        beacon.stop()
        worker_status.forget()
        health.forget()


def test_a_beat_that_fails_unexpectedly_does_not_stop_the_beacon(settings, monkeypatch):
    """Anything a beat raises besides a Redis error is logged; the next beat goes on, so a
    live worker never reads "down" because its beacon thread died."""
    settings.TRAINBOARD_WORKER_STATUS_TTL = 0.2
    name = f"unlucky-{time.time_ns()}@test"
    beacon = worker_status.Beacon(name)
    beacon.start()
    beacon.mark_ready()
    real_state, failures = beacon.state, []

    def state_failing_once(client, now):
        if not failures:
            failures.append(now)
            raise ValueError("a surprise")
        return real_state(client, now)

    monkeypatch.setattr(beacon, "state", state_failing_once)
    try:
        _until(lambda: bool(failures), True)
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL)
        failed_at = failures[0]
        _until(lambda: client.zscore(worker_status.BEACON_KEY, name) > failed_at, True)
        assert beacon.is_alive()
    finally:
        beacon.stop()


def test_a_status_read_that_raises_wakes_the_requests_waiting_on_it(settings, monkeypatch):
    """A read of the beats that dies of something else than a Redis error (a malformed
    ``REDIS_URL`` raises ValueError) still counts as done: the request waiting on it is woken
    and reads no worker, instead of waiting out ``ANSWER_WAIT`` (made 600 s here, so a request
    left waiting could not finish inside the join below)."""
    monkeypatch.setattr(worker_status, "ANSWER_WAIT", 600.0)

    def unreadable() -> tuple[list[str], list[str]]:
        raise ValueError("Redis URL must specify one of the following schemes")

    monkeypatch.setattr(worker_status, "read_beats", unreadable)
    worker_status.forget()
    answers: list[dict] = []
    reader = threading.Thread(target=lambda: answers.append(worker_status.worker_status()))
    try:
        reader.start()
        reader.join(timeout=30)
        assert not reader.is_alive()
        assert answers[0]["workers"] == []
    finally:
        worker_status.forget()
