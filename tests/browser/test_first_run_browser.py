"""A newcomer is led, in Chromium: a new user's home page shows the first run
(the demo's quick try, its forecast: calls and tokens, the time known after a first run; what
to look at next); one click starts it and opens its run page; "Launch a run" opens a form
with the program chosen, whose forecast now has a time.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep the home page at 1280 and 390 px."""

from __future__ import annotations

import re

import pytest
from helpers_runs import screenshot, shell

from tests.support.waiting import until

pytestmark = pytest.mark.browser

#: A model no other test runs: the newcomer's is never measured before its first run.
MODEL = "fake/fewshot?latency=0.021"
#: How many runs of it the worker has kept observations of.
OBSERVED = (
    f"from training.execution.pace import measured;print(len(measured.observations({MODEL!r})))"
)
NEWCOMER = """
from django.contrib.auth import get_user_model
from training.programs.demo import ensure_demo_program
user = get_user_model().objects.create_user({name!r}, password="a-newcomer-password-1")
print(ensure_demo_program(user, model={model!r}).pk)
"""


def test_a_newcomer_is_led_from_the_home_page_to_a_first_run(browser_page, live_stack):
    page = browser_page
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    demo = int(shell(live_stack, NEWCOMER.format(name="newcomer", model=MODEL)))
    page.goto("/accounts/login/")
    page.fill("#id_username", "newcomer")
    page.fill("#id_password", "a-newcomer-password-1")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.goto("/")
    first = page.locator("#first-run")
    assert "Demo: route support messages" in first.inner_text()
    # no run of the model yet: calls and tokens, and the time known after a first run
    told = page.locator(f'#quick-try-forecast-{demo}[data-state="untimed"]')
    told.wait_for(timeout=30_000)
    assert "time known after a first run on this model" in told.inner_text()
    assert "minute or two" not in page.locator("main").inner_text()
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        screenshot(page, f"home-first-run-{width}")
    page.set_viewport_size({"width": 1280, "height": 900})
    # the launch form says the same for the same preset
    page.goto(f"/runs/new/?program={demo}&preset=quick")
    page.locator('#forecast-summary[data-state="untimed"]').wait_for(timeout=30_000)
    summary = page.locator("#forecast-summary").inner_text()
    assert "time known after a first run on this model" in summary
    page.goto("/")
    page.click("#first-run-start")  # one click
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=90_000)
    assert "CalibratedLabels" in page.locator(".page-header").inner_text()  # a label set
    until(lambda: shell(live_stack, OBSERVED) == "1", 30, "the worker kept what the run observed")
    page.goto("/")
    assert page.locator("#first-run").count() == 0  # led once
    page.click(".page-header a.button:has-text('Launch a run')")
    page.wait_for_url("**/runs/new/")
    assert page.locator("#id_program").input_value() == str(demo)
    # after that first run, the form's forecast has a time range
    timed = page.locator('#forecast-summary[data-state="timed"]')
    timed.wait_for(timeout=30_000)
    assert re.search(r", \d+–\d+ (s|min)", timed.inner_text())
    assert errors == []
