"""Forecast and budget in Chromium against the real server and Celery worker (fake models).

The launch form's forecast follows the settings, and warns of a cap below it; a cap on calls is never passed, the capped run's best program is still evaluated,
and the run resumes with the higher cap its form offers.
Set ``BUDGET_SHOTS_DIR`` to keep screenshots of the pages at 1280 and 390 px.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers_runs import (
    demo_program,
    fill_fields,
    launch_from_form,
    open_advanced,
    run_field,
    scroll_to,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

SHOTS = os.environ.get("BUDGET_SHOTS_DIR", "")


def shoot(page, name: str, selector: str | None = None) -> None:
    """Screenshots at desktop and phone width (only when BUDGET_SHOTS_DIR is set)."""
    if not SHOTS:
        return
    Path(SHOTS).mkdir(parents=True, exist_ok=True)
    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        if selector:
            scroll_to(page, selector)
        page.screenshot(path=f"{SHOTS}/{name}-{width}.png", full_page=selector is None)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, f"{name} overflows horizontally at {width} px by {overflow} px"
    page.set_viewport_size({"width": 1280, "height": 900})


def log_sizes(live_stack) -> dict[str, int]:
    return {
        name: (live_stack.stack.log_dir / f"{name}.log").stat().st_size
        for name in ("web", "worker")
    }


def assert_no_traceback_since(live_stack, offsets: dict[str, int]) -> None:
    """The web and worker logs of this test hold no traceback (an error shown as words)."""
    for name, offset in offsets.items():
        with open(live_stack.stack.log_dir / f"{name}.log", "rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
        assert "Traceback" not in text, f"{name}.log: {text[-3000:]}"


def forecast_calls(page) -> int:
    return int(page.locator("#forecast-summary").get_attribute("data-calls"))


def test_the_forecast_follows_the_epochs(logged_in_page, live_stack):
    page = logged_in_page
    offsets = log_sizes(live_stack)
    _, program_id = demo_program(live_stack, "Forecast router", "fake/fewshot")
    page.goto(f"/runs/new/?program={program_id}")
    # The form opens pre-filled (the user's last run): its first answer is for that form, so
    # the figure for 2 epochs is the first answer to a revision made after the change.
    opened = int(page.input_value("#forecast-revision"))
    page.fill("#id_epochs", "2")
    page.wait_for_function(
        f"""() => {{
            const revision = Number(document.querySelector('#forecast-revision').value);
            const answer = document.querySelector('#forecast-answer');
            return revision > {opened} && answer && Number(answer.dataset.revision) === revision;
        }}""",
        timeout=90_000,
    )
    # Tokens and cost come with the calls (sized from the program's prompts).
    summary = page.locator("#forecast-summary[data-calls]")
    expect(summary).to_contain_text("tokens", timeout=90_000)
    expect(summary).to_contain_text("$0.00")
    two = forecast_calls(page)
    page.fill("#id_epochs", "6")
    page.wait_for_function(
        f"() => Number(document.querySelector('#forecast-summary').dataset.calls) > {two}",
        timeout=30_000,
    )
    six = forecast_calls(page)
    assert six > two
    assert page.locator("#forecast-calls").inner_text().startswith("about ")
    page.fill("#id_epochs", "2")
    page.wait_for_function(
        f"() => Number(document.querySelector('#forecast-summary').dataset.calls) === {two}",
        timeout=30_000,
    )
    shoot(page, "launch-form-forecast", "#run-forecast")
    assert_no_traceback_since(live_stack, offsets)


def test_a_calls_cap_stops_the_run_and_it_resumes_with_a_higher_cap(logged_in_page, live_stack):
    page = logged_in_page
    offsets = log_sizes(live_stack)
    _, program_id = demo_program(live_stack, "Capped router", "fake/fewshot?latency=0.05")
    page.goto(f"/runs/new/?program={program_id}")
    open_advanced(page)
    fill_fields(page, epochs=3, batch_size=4, validation_split=0.25, seed=3)
    fill_fields(page, evaluations_before=1, evaluations_after=1)
    fill_fields(page, budget_calls=80)  # past the first epoch: a checkpoint, candidates
    expect(page.locator("#forecast-summary[data-calls]")).to_be_visible(timeout=90_000)
    assert forecast_calls(page) > 80
    warning = page.locator(".forecast-cap-warning")
    expect(warning).to_contain_text("This cap (80 LM calls) is below the forecast")
    expect(warning).to_contain_text("it stops the run after about")
    shoot(page, "launch-form-cap-warning", "#run-forecast")
    run_id = launch_from_form(page)

    expect(page.locator('#run-status .status-badge[data-status="stopped"]')).to_be_visible(
        timeout=90_000
    )
    expect(page.locator("#run-status .run-error")).to_contain_text("stopped: budget reached")
    page.reload()  # the page as stored, not only as streamed
    calls = int(page.locator("#usage-calls").inner_text())
    assert 0 < calls <= 80  # the cap is a promise
    expect(page.locator("#run-status .run-error")).to_contain_text(
        "the best program so far was evaluated on the test split"
    )
    expect(page.locator("#budget-caps")).to_contain_text("reached")
    assert page.locator("#run-leaderboard tr.candidate").count() >= 1  # kept
    expect(page.locator("#run-forecast-actual tr[data-row='LM calls']")).to_contain_text(str(calls))
    # The resume form offers a cap it accepts: what was used plus the cap again.
    assert page.input_value("#budget-resume #id_budget_calls") == str(calls + 80)
    shoot(page, "run-budget-stopped")

    page.fill("#budget-resume #id_budget_calls", "100000")
    page.click("#resume-budget")
    expect(page.locator('#run-status .status-badge[data-status="succeeded"]')).to_be_visible(
        timeout=120_000
    )
    page.reload()
    assert int(page.locator("#usage-calls").inner_text()) > calls
    assert run_field(live_stack, run_id, "attempt") == 2
    error = page.locator("#run-forecast-actual tr[data-row='LM calls'] td").nth(2).inner_text()
    assert error.endswith(" %")
    shoot(page, "run-forecast-vs-actual", "#run-forecast-actual")
    assert_no_traceback_since(live_stack, offsets)
