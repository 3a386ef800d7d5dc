"""In Chromium, logged in: see the worker indicator say alive, and receive a WebSocket
message that a Celery worker process published, through the real daphne server."""

import pytest

pytestmark = pytest.mark.browser


def test_login_worker_indicator_and_websocket_round_trip(logged_in_page, live_stack):
    from tests.support.consumers import echo_group
    from tests.support.tasks import broadcast

    page = logged_in_page
    page.goto("/")
    indicator = page.locator("#worker-status .worker-indicator")
    indicator.and_(page.locator('[data-state="alive"]')).wait_for(timeout=20_000)
    assert "alive" in indicator.inner_text()  # other tests' killed workers may read "gone quiet"
    assert page.evaluate("typeof htmx") == "object"
    ws_ext = page.locator('script[src*="django_htmx/ext/hx-ws-2"]').get_attribute("src")
    assert page.request.get(ws_ext).status == 200

    page.evaluate(
        """() => new Promise((resolve, reject) => {
            const ws = new WebSocket(`ws://${location.host}/ws/echo/browser/`);
            window.__messages = [];
            ws.onmessage = (e) => window.__messages.push(JSON.parse(e.data));
            ws.onopen = () => resolve(true);
            ws.onclose = (e) => reject(new Error('closed ' + e.code));
            window.__ws = ws;
        })"""
    )
    broadcast.delay(echo_group(live_stack.user_id, "browser"), {"from": "worker"}).get(timeout=20)
    page.wait_for_function("() => window.__messages.length > 0", timeout=20_000)
    assert page.evaluate("window.__messages[0]") == {"from": "worker"}


def test_anonymous_browser_is_sent_to_login(browser_page):
    browser_page.goto("/settings/")
    assert "/accounts/login/" in browser_page.url
