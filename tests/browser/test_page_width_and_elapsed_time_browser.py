"""In Chromium: every main page fits 1280 px and 390 px wide screens
(no horizontal page scroll), and a running run's elapsed time ticks and its duration arrives
live with the last update, in the server's own duration format."""

from __future__ import annotations

import re

import pytest
from helpers_runs import create_program, demo_dataset_id, launch_run, run_field, shell

from tests.support.waiting import until
from training.templatetags.training_extras import duration

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)


def wait_finished(live_stack, run_ids, timeout=120):
    until(
        lambda: all(run_field(live_stack, r, "status") == "succeeded" for r in run_ids),
        timeout,
        f"runs {run_ids} finished",
        poll=0.5,
    )


@pytest.fixture(scope="module")
def finished_runs(live_stack):
    dataset = demo_dataset_id(live_stack)
    program = create_program(
        live_stack, "A router with a rather long program name", "fake/fewshot", dataset
    )
    config = dict(epochs=2, batch_size=8, evaluations_before=1, evaluations_after=2)
    runs = [launch_run(live_stack, program, dataset, **config) for _ in range(2)]
    wait_finished(live_stack, runs)
    candidate = shell(
        live_stack,
        f"from training.models import Candidate;print(Candidate.objects.filter(run_id={runs[0]}).first().pk)",
    )
    return {"dataset": dataset, "program": program, "runs": runs, "candidate": int(candidate)}


def main_pages(data) -> dict[str, str]:
    first, second = data["runs"]
    return {
        "home": "/",
        "datasets": "/datasets/",
        "dataset": f"/datasets/{data['dataset']}/",
        "upload": "/datasets/upload/",
        "programs": "/programs/",
        "new program": "/programs/new/",
        "program": f"/programs/{data['program']}/",
        "runs": "/runs/",
        "launch": "/runs/new/",
        "run": f"/runs/{first}/",
        "candidate": f"/runs/{first}/candidates/{data['candidate']}/",
        "compare": f"/compare/?runs={first}&runs={second}",
        "settings": "/settings/",
    }


@pytest.mark.parametrize("width", WIDTHS)
def test_main_pages_have_no_horizontal_overflow(logged_in_page, finished_runs, width):
    page = logged_in_page
    page.set_viewport_size({"width": width, "height": 900})
    overflowing = {}
    for name, url in main_pages(finished_runs).items():
        page.goto(url)
        page.evaluate("document.fonts.ready.then(() => true)")
        scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert inner == width
        if scroll > inner:
            overflowing[name] = scroll
    assert overflowing == {}, f"pages wider than {width} px: {overflowing}"
    page.goto("/runs/")
    if width == 1280:  # the runs table's last column is on screen
        last = page.locator("#run-list th").last
        assert "Duration" in last.inner_text()
        box = last.bounding_box()
        assert box["x"] + box["width"] <= width
    for link in page.locator("nav.mainnav a").all():  # the navigation is whole
        box = link.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, link.inner_text()


def test_elapsed_time_ticks_and_the_duration_arrives_with_the_last_update(
    logged_in_page, live_stack, finished_runs
):
    page = logged_in_page
    dataset = finished_runs["dataset"]
    program = create_program(live_stack, "Slow router", "fake/fewshot?latency=0.25", dataset)
    config = dict(epochs=3, batch_size=9, evaluations_before=0, evaluations_after=1)
    run = launch_run(live_stack, program, dataset, **config)
    page.goto(f"/runs/{run}/")
    elapsed = page.locator("#run-timing .run-elapsed")
    elapsed.wait_for(timeout=30_000)
    page.locator("#run-timing .run-eta").wait_for(timeout=30_000)
    first = elapsed.inner_text()
    page.wait_for_function(
        "(first) => { const e = document.querySelector('#run-timing .run-elapsed');"
        " return e && e.textContent !== first; }",
        arg=first,
        timeout=5_000,
    )
    assert re.fullmatch(r"(\d+m \d\ds|\d+s)", elapsed.inner_text())
    duration = page.locator("#run-timing .run-duration")
    duration.wait_for(timeout=90_000)  # no reload: the run's last live update carried it
    assert re.fullmatch(r"(\d+m \d\ds|\d+s)", duration.inner_text())
    assert page.locator("#run-timing").get_attribute("data-ticking") == "false"
    assert page.locator('#run-status .status-badge[data-status="succeeded"]').count() == 1


def test_the_browser_ticks_durations_in_the_servers_format(logged_in_page):
    """The live figures the browser writes (Trainboard.formatDuration) read as the server's
    ``duration`` filter renders them, at each boundary of the format."""
    samples = [0, 0.4, 9.9, 59, 60, 65, 599, 3599, 3600, 3660, 3725, 86399, 90061]
    logged_in_page.goto("/")
    shown = logged_in_page.evaluate("(s) => s.map((v) => Trainboard.formatDuration(v))", samples)
    assert shown == [duration(value) for value in samples]
