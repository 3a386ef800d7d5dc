"""Settings page, worker indicator and /healthz (in-process, no live stack)."""

import itertools
import threading
import time

import pytest

from core import health, worker_status
from tests.private_redis import private_redis_fixture  # noqa: F401  (fixture "private_redis")
from tests.support.waiting import until


@pytest.mark.smoke
@pytest.mark.django_db
def test_settings_page_names_configured_providers_never_values(user_client, monkeypatch, settings):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-value-123")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings.TRAINBOARD_LM = "openai/gpt-test"
    html = user_client.get("/settings/").content.decode()
    assert "sk-very-secret-value-123" not in html
    assert "openai/gpt-test" in html and "local/minilm" in html
    row = html.split("OPENAI_API_KEY", 1)[1].split("</tr>", 1)[0]
    assert ">yes<" in row
    row = html.split("ANTHROPIC_API_KEY", 1)[1].split("</tr>", 1)[0]
    assert ">no<" in row


@pytest.mark.smoke
@pytest.mark.django_db
def test_worker_indicator_says_not_running_without_worker(user_client, monkeypatch):
    worker_status.forget()
    monkeypatch.setattr(worker_status, "read_beats", lambda: ([], []))
    html = user_client.get("/status/worker/", headers={"HX-Request": "true"}).content.decode()
    assert 'data-state="down"' in html and "not running" in html
    worker_status.forget()


@pytest.mark.smoke
@pytest.mark.django_db
def test_healthz_names_what_is_down(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    worker_status.forget()
    health.forget()
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "up" and body["channel_layer"] == "up"
    # the workers' beats live in Redis: with it down, whether they run cannot be told
    assert body["broker"] == "down" and body["worker"] == "unknown"
    assert body["down"] == ["broker"]
    worker_status.forget()


@pytest.mark.django_db
def test_the_indicator_tells_a_broker_outage_from_a_dead_worker(user_client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    worker_status.forget()
    html = user_client.get("/status/worker/", headers={"HX-Request": "true"}).content.decode()
    assert 'data-state="unknown"' in html and "workers: unknown (Redis unreachable)" in html
    assert "not running" not in html
    worker_status.forget()


@pytest.mark.django_db
def test_the_indicator_counts_workers_and_names_one_gone_quiet(
    user_client, settings, private_redis
):
    """Two workers beat, then one is killed (no goodbye): "1 alive, 1 gone quiet", on a real
    Redis of its own (no other worker beats there)."""
    import redis

    for name, value in private_redis.settings().items():
        setattr(settings, name, value)
    settings.TRAINBOARD_WORKER_STATUS_TTL = 0.5
    client = redis.Redis.from_url(settings.REDIS_URL)
    now = time.time()
    names = {f"a-{now}@test": now, f"b-{now}@test": now}
    client.zadd(worker_status.BEACON_KEY, names)
    try:
        worker_status.forget()
        html = user_client.get("/status/worker/").content.decode()
        assert "workers: 2 alive" in html
        killed = f"b-{now}@test"
        client.zadd(worker_status.BEACON_KEY, {killed: now - worker_status.max_age() - 1})
        worker_status.forget()
        html = user_client.get("/status/worker/").content.decode()
        assert "workers: 1 alive, 1 gone quiet" in html and killed in html
    finally:
        client.zrem(worker_status.BEACON_KEY, *names)
        worker_status.forget()


def test_many_parallel_status_reads_share_one_read(monkeypatch, settings):
    """200 readers at once (health checks, indicators): one Redis read, never one each."""
    settings.TRAINBOARD_WORKER_STATUS_TTL = 60
    pings, in_flight, most_in_flight = [], [0], [0]
    lock = threading.Lock()
    readers_started = threading.Event()

    def slow_ping():
        with lock:
            in_flight[0] += 1
            most_in_flight[0] = max(most_in_flight[0], in_flight[0])
        assert readers_started.wait(10)  # the read is in flight while all 200 readers start
        with lock:
            in_flight[0] -= 1
            pings.append(1)
        return ["w@test"], []

    monkeypatch.setattr(worker_status, "read_beats", slow_ping)
    worker_status.forget()
    answers = []
    readers = [
        threading.Thread(target=lambda: answers.append(worker_status.worker_status()))
        for _ in range(200)
    ]
    for reader in readers:
        reader.start()
    readers_started.set()
    for reader in readers:
        reader.join(10)
    assert len(answers) == 200 and all(answer["alive"] for answer in answers)
    assert len(pings) == 1 and most_in_flight[0] == 1
    worker_status.forget()


def test_a_stale_status_is_refreshed_in_the_background(monkeypatch, settings):
    settings.TRAINBOARD_WORKER_STATUS_TTL = 0.2
    calls = itertools.count()

    refreshing, answer = threading.Event(), threading.Event()

    def ping():
        if next(calls) == 0:
            return ["w1@test"], []
        refreshing.set()
        assert answer.wait(10)  # a slow read, answered when the test says
        return [], []  # the worker has gone: later pings find nobody

    monkeypatch.setattr(worker_status, "read_beats", ping)
    worker_status.forget()
    assert worker_status.worker_status()["workers"] == ["w1@test"]
    time.sleep(0.3)  # wall time past the TTL (0.2 s): the status is stale now
    # Stale: this read returns at once with the last answer and starts one refresh, which
    # is still reading (held until ``answer``).
    started = time.monotonic()
    assert worker_status.worker_status()["workers"] == ["w1@test"]
    assert time.monotonic() - started < 0.2
    assert refreshing.wait(5)
    answer.set()
    until(
        lambda: not worker_status.worker_status()["alive"],
        worker_status.max_age() + 3,
        "the refresh found nobody",
    )
    status = worker_status.worker_status()
    assert status["alive"] is False and status["workers"] == []
    worker_status.forget()
