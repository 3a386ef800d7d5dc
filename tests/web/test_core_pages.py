"""Settings page, worker indicator and /healthz (in-process, no live stack)."""

import itertools
import threading
import time

import pytest

from core import health, worker_status


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
    monkeypatch.setattr(worker_status, "beating_workers", lambda: [])
    html = user_client.get("/status/worker/", headers={"HX-Request": "true"}).content.decode()
    assert 'data-state="down"' in html and "not running" in html
    worker_status.forget()


@pytest.mark.smoke
@pytest.mark.django_db
def test_healthz_names_what_is_down(client, settings, monkeypatch):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    worker_status.forget()
    health.forget()
    monkeypatch.setattr(worker_status, "beating_workers", lambda: [])
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "up" and body["channel_layer"] == "up"
    assert body["broker"] == "down" and body["worker"] == "down"
    assert body["down"] == ["broker", "worker"]
    worker_status.forget()


def test_many_parallel_status_reads_share_one_read(monkeypatch, settings):
    """200 readers at once (health checks, indicators): one Redis read, never one each."""
    settings.TRAINBOARD_WORKER_STATUS_TTL = 60
    pings, in_flight, most_in_flight = [], [0], [0]
    lock = threading.Lock()

    def slow_ping():
        with lock:
            in_flight[0] += 1
            most_in_flight[0] = max(most_in_flight[0], in_flight[0])
        time.sleep(0.3)
        with lock:
            in_flight[0] -= 1
            pings.append(1)
        return ["w@test"]

    monkeypatch.setattr(worker_status, "beating_workers", slow_ping)
    worker_status.forget()
    answers = []
    readers = [
        threading.Thread(target=lambda: answers.append(worker_status.worker_status()))
        for _ in range(200)
    ]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(10)
    assert len(answers) == 200 and all(answer["alive"] for answer in answers)
    assert len(pings) == 1 and most_in_flight[0] == 1
    worker_status.forget()


def test_a_stale_status_is_refreshed_in_the_background(monkeypatch, settings):
    settings.TRAINBOARD_WORKER_STATUS_TTL = 0.2
    calls = itertools.count()

    def ping():
        if next(calls) == 0:
            return ["w1@test"]
        time.sleep(0.5)  # the worker has gone: later pings find nobody
        return []

    monkeypatch.setattr(worker_status, "beating_workers", ping)
    worker_status.forget()
    assert worker_status.worker_status()["workers"] == ["w1@test"]
    time.sleep(0.3)
    # Stale: this read returns at once with the last answer and starts one refresh.
    started = time.monotonic()
    assert worker_status.worker_status()["workers"] == ["w1@test"]
    assert time.monotonic() - started < 0.2
    deadline = time.monotonic() + worker_status.max_age() + 3
    while worker_status.worker_status()["alive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    status = worker_status.worker_status()
    assert status["alive"] is False and status["workers"] == []
    worker_status.forget()
