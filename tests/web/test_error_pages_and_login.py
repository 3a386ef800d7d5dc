"""Friendly 400/404/500 pages with the details in the log, and throttled log-ins (18.11)."""

import logging

import pytest
from django.core.cache import cache
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_throttle_counters(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only
    cache.clear()
    yield
    cache.clear()


def test_a_404_is_the_friendly_page_without_url_patterns(client):
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    text = response.content.decode()
    assert "Page not found" in text and "Back to the dashboard" in text
    assert "URLconf" not in text and "datasets/" not in text


@override_settings(ROOT_URLCONF="tests.web.crash_urls", LOGIN_REQUIRED_IGNORE=True)
def test_a_500_is_the_friendly_page_and_the_traceback_goes_to_the_log(django_user_model, caplog):
    user = django_user_model.objects.create_user("carol", password="a-long-password-3")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = client.post("/crash/", {"document": "the uploaded secret document"})
    assert response.status_code == 500
    text = response.content.decode()
    assert "Something went wrong on the server" in text
    assert "secret document" not in text and "Traceback" not in text
    assert "csrfmiddlewaretoken" not in text and "boom" not in text
    logged = [r for r in caplog.records if r.name == "django.request"]
    assert logged and logged[0].exc_info and "boom in a view" in str(logged[0].exc_info[1])


def test_too_many_fields_is_a_friendly_400(client, settings):
    fields = {f"f{i}": "x" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    response = client.post("/accounts/login/", fields)
    assert response.status_code == 400
    assert "This request could not be read" in response.content.decode()


def test_login_is_throttled_per_username_with_a_clear_message(client, django_user_model, settings):
    django_user_model.objects.create_user("erin", password="a-long-password-5")
    allowed = settings.TRAINBOARD_LOGIN_FAILURES_PER_USER
    for _ in range(allowed):
        bad = client.post("/accounts/login/", {"username": "erin", "password": "nope"})
        assert bad.status_code == 200 and b"Wrong username or password" in bad.content
    # Even the right password is refused now: the attempt is not checked at all.
    refused = client.post("/accounts/login/", {"username": "Erin", "password": "a-long-password-5"})
    assert refused.status_code == 429
    text = refused.content.decode()
    assert "Too many failed log-in attempts" in text and "Try again in 15 minutes" in text
    assert "_auth_user_id" not in client.session
    other = Client(REMOTE_ADDR="10.0.0.9")
    assert other.post("/accounts/login/", {"username": "erin", "password": "x"}).status_code == 429


def test_a_username_spelt_another_unicode_way_shares_its_counter(
    client, django_user_model, settings
):
    django_user_model.objects.create_user("carol", password="a-long-password-7")
    for _ in range(settings.TRAINBOARD_LOGIN_FAILURES_PER_USER):
        client.post("/accounts/login/", {"username": "carol", "password": "nope"})
    # a full-width c: Django logs it in as carol (NFKC), so it is carol's counter too
    other = Client(REMOTE_ADDR="10.0.0.8")
    refused = other.post(
        "/accounts/login/", {"username": "\uff43arol", "password": "a-long-password-7"}
    )
    assert refused.status_code == 429


def test_login_is_throttled_per_address_across_usernames(client, django_user_model, settings):
    django_user_model.objects.create_user("frank", password="a-long-password-6")
    for index in range(settings.TRAINBOARD_LOGIN_FAILURES_PER_ADDRESS):
        client.post("/accounts/login/", {"username": f"guess{index}", "password": "x"})
    blocked = client.post(
        "/accounts/login/", {"username": "frank", "password": "a-long-password-6"}
    )
    assert blocked.status_code == 429
    elsewhere = Client(REMOTE_ADDR="10.0.0.7")
    ok = elsewhere.post("/accounts/login/", {"username": "frank", "password": "a-long-password-6"})
    assert ok.status_code == 302


def test_a_successful_login_clears_the_username_counter(client, django_user_model, settings):
    django_user_model.objects.create_user("gina", password="a-long-password-7")
    for _ in range(settings.TRAINBOARD_LOGIN_FAILURES_PER_USER - 1):
        client.post("/accounts/login/", {"username": "gina", "password": "x"})
    good = client.post("/accounts/login/", {"username": "gina", "password": "a-long-password-7"})
    assert good.status_code == 302
    client.logout()
    client.post("/accounts/login/", {"username": "gina", "password": "x"})
    again = client.post("/accounts/login/", {"username": "gina", "password": "a-long-password-7"})
    assert again.status_code == 302
