"""Settings page, worker indicator and /healthz (in-process, no live stack)."""

import pytest
from django.core.cache import cache


@pytest.fixture
def user_client(client, django_user_model):
    user = django_user_model.objects.create_user("bob", password="a-long-password-2")
    client.force_login(user)
    return client


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
    cache.clear()
    monkeypatch.setattr("core.worker_status.ping_workers", lambda timeout=1.0: [])
    html = user_client.get("/status/worker/", headers={"HX-Request": "true"}).content.decode()
    assert 'data-state="down"' in html and "not running" in html
    cache.clear()


@pytest.mark.smoke
@pytest.mark.django_db
def test_healthz_names_what_is_down(client, settings, monkeypatch):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    monkeypatch.setattr("core.health.ping_workers", lambda timeout=1.0: [])
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "up" and body["channel_layer"] == "up"
    assert body["broker"] == "down" and body["worker"] == "down"
    assert body["down"] == ["broker", "worker"]
