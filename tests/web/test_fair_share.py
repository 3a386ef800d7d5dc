"""On the live stack (daphne, the real middleware): one member firing 60 page loads at once
gets the excess answered 429 at once, while another member's page loads as usual; a made-up
session cookie per request does not escape the bound."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import requests
from django.conf import settings

OTHER = """
from django.contrib.auth import get_user_model
User = get_user_model()
if not User.objects.filter(username="fair-other").exists():
    User.objects.create_user("fair-other", password="fair-other-password-1")
print("ok")
"""


def logged_in(live_stack, username: str, password: str) -> requests.Session:
    session = requests.Session()
    session.get(live_stack.url + "accounts/login/", timeout=10)
    response = session.post(
        live_stack.url + "accounts/login/",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        headers={"Referer": live_stack.url + "accounts/login/"},
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 302
    return session


def flood(live_stack, cookies_for, count: int = 60) -> list[requests.Response]:
    """``count`` GETs of /runs/ released at the same moment (a barrier)."""
    start = threading.Barrier(count)

    def one(index: int) -> requests.Response:
        start.wait(timeout=30)
        return requests.get(
            live_stack.url + "runs/",
            cookies=cookies_for(index),
            allow_redirects=False,
            timeout=60,
        )

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def test_a_flood_by_one_member_is_bounded_and_another_member_is_served(live_stack):
    live_stack.shell(OTHER)
    flooder = logged_in(live_stack, live_stack.username, live_stack.password)
    other = logged_in(live_stack, "fair-other", "fair-other-password-1")
    cookies = flooder.cookies.get_dict()
    answers: dict[str, requests.Response] = {}

    def other_loads():
        answers["other"] = other.get(live_stack.url + "runs/", timeout=60)

    reader = threading.Timer(0.2, other_loads)
    reader.start()
    statuses = [r.status_code for r in flood(live_stack, lambda _: cookies)]
    reader.join(60)
    refused = [s for s in statuses if s == 429]
    assert refused and statuses.count(200) >= 1
    assert set(statuses) == {200, 429}
    assert answers["other"].status_code == 200
    after = requests.get(live_stack.url + "runs/", cookies=cookies, timeout=10)
    assert after.status_code == 200  # the flood is over: the member is served again


def test_a_made_up_session_cookie_per_request_is_still_one_client(live_stack):
    def made_up(index: int) -> dict:
        return {settings.SESSION_COOKIE_NAME: f"made-up-{index:04d}{'x' * 24}"}

    responses = flood(live_stack, made_up)
    # anonymous, all from one address: the login redirect for some, 429 for the rest
    assert {r.status_code for r in responses} <= {302, 429}
    assert sum(r.status_code == 429 for r in responses) > 0
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.text.startswith("Too many requests at once from you")
    assert refused.headers["Retry-After"] == "1"
