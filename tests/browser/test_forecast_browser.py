"""The launch form's forecast under load, in Chromium against the real server and worker.

While two runs hold both worker processes (when a forecast could go stale, or its request be
killed after a long wait), the forecast answers a real HTTP request within a second, and
switching the form to OMEGA shows OMEGA's forecast: no answer computed for the form before
the switch is swapped in after it (htmx ``hx-sync`` replace, and the form's revision echoed
by every answer).
Set ``FORECAST_SHOTS_DIR`` to keep screenshots of the form at 1280 and 390 px.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
from helpers_runs import ENDLESS, demo_program, launch_run, run_field, scroll_to
from playwright.sync_api import expect

from tests.support.waiting import until

pytestmark = pytest.mark.browser

SHOTS = os.environ.get("FORECAST_SHOTS_DIR", "")
#: Every swap of the forecast box, as the page saw it: (form revision then, answer's revision,
#: state, calls, whether the OMEGA row is there).
RECORD_SWAPS = """
window.forecastSwaps = [];
document.body.addEventListener("htmx:afterSwap", function (event) {
  if (event.detail.target.id !== "run-forecast") return;
  var answer = document.getElementById("forecast-answer");
  var summary = document.getElementById("forecast-summary");
  window.forecastSwaps.push({
    form: Number(document.getElementById("forecast-revision").value),
    answer: Number(answer ? answer.dataset.revision : -1),
    calls: summary ? Number(summary.dataset.calls || 0) : 0,
    omega: document.getElementById("run-forecast").innerText.indexOf("Mutations") >= 0,
  });
});
"""


def busy_workers(live_stack) -> list[int]:
    """Two endless runs, one in each worker process, until both are running."""
    dataset_id, program_id = demo_program(live_stack, "Busy router", "fake/fewshot?latency=0.02")
    ids = [launch_run(live_stack, program_id, dataset_id, **ENDLESS) for _ in range(2)]
    until(
        lambda: all(run_field(live_stack, run_id, "status") == "running" for run_id in ids),
        60,
        "the worker started both runs",
        poll=0.5,
    )
    return ids


def test_the_forecast_answers_at_once_and_never_stale_while_workers_are_busy(
    logged_in_page, live_stack
):
    page = logged_in_page
    busy = busy_workers(live_stack)
    dataset_id, program_id = demo_program(live_stack, "Forecast under load", "fake/rules")
    page.goto(f"/runs/new/?program={program_id}")
    page.select_option("#id_dataset", str(dataset_id))
    expect(page.locator("#forecast-summary[data-calls]")).to_be_visible()
    # A real request, as the form sends it: answered within a second though no worker is free.
    query = {
        "program": program_id,
        "dataset": dataset_id,
        "reward": "ExactMatch",
        "optimizer": "OMEGA",
        "epochs": 2,
        "batch_size": 8,
        "validation_split": 0.2,
        "evaluations_before": 1,
        "evaluations_after": 1,
        "omega_algorithm": "dns",
        "omega_selection": "softmax",
        "forecast_revision": 5,
    }
    for _ in range(3):
        began = time.monotonic()
        response = page.request.get(f"/runs/new/forecast/?{urlencode(query)}")
        took = time.monotonic() - began
        assert response.status == 200 and took < 1.0, f"{took:.2f} s"
        assert 'data-revision="5"' in response.text()
    assert all(run_field(live_stack, run_id, "status") == "running" for run_id in busy)

    page.evaluate(RECORD_SWAPS)
    before = page.evaluate("Number(document.getElementById('forecast-revision').value)")
    # The answer to the RandomFewShot form is held back until the form has changed to OMEGA.
    held = []

    def hold_random_few_shot(route):
        if "optimizer=RandomFewShot" in route.request.url:
            held.append(route)
        else:
            route.continue_()

    page.route("**/runs/new/forecast/**", hold_random_few_shot)
    page.fill("#id_epochs", "3")  # a RandomFewShot forecast on its way ...
    deadline = time.monotonic() + 10
    while not held:  # ... sent after the form's 600 ms debounce
        assert time.monotonic() < deadline, "no forecast request for the changed epochs"
        page.wait_for_timeout(100)
    page.select_option("#id_optimizer", "OMEGA")  # ... and the form changes under it
    expect(page.locator("#run-forecast")).to_contain_text("Mutations / crossovers")
    for route in held:  # the late answer arrives now
        try:
            route.continue_()
        except Exception:  # htmx aborted it when the form changed (hx-sync replace)
            pass
    page.wait_for_timeout(2500)  # the slow answer had time to land
    switched = page.evaluate("Number(document.getElementById('forecast-revision').value)")
    assert switched > before
    swaps = page.evaluate("window.forecastSwaps")
    assert swaps, "no forecast was swapped in"
    assert all(swap["answer"] == swap["form"] for swap in swaps), swaps  # never a stale one
    assert swaps[-1]["omega"] and swaps[-1]["answer"] == switched
    answer = page.locator("#forecast-answer")
    assert answer.get_attribute("data-revision") == str(switched)
    page.unroute("**/runs/new/forecast/**")
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        for width, height in ((1280, 900), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            scroll_to(page, "#run-forecast")
            page.screenshot(path=f"{SHOTS}/forecast-busy-{width}.png")
