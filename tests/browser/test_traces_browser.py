"""LM call traces in Chromium against the real server and worker: a failed call opens from
its error group, an LM answer holding ``<script>`` stays text in the trace viewer, the list
filters by role, candidate and failure, and the pages fit a phone's width.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep screenshots of the errors panel and the trace
viewer at 1280 and 390 px.
"""

from __future__ import annotations

import pytest
from helpers_runs import finished_small_run, fits_the_width, screenshot, scroll_to

pytestmark = pytest.mark.browser

FLAKY = "fake/fewshot?failure_rate=0.3&failure=fatal"


def test_a_failed_call_opens_from_its_error_group(logged_in_page, live_stack):
    page = logged_in_page
    run_id = finished_small_run(page, live_stack, "Flaky", FLAKY)
    group = page.locator("#error-groups tr.error-group").first
    assert "simulated non-retryable failure" in group.inner_text()
    count = int(group.locator(".error-group-link").inner_text())
    group.locator(".error-group-link").click()
    page.wait_for_url(f"**/runs/{run_id}/traces/?*")
    rows = page.locator("#trace-table tr.trace")
    assert rows.count() == min(count, 50)
    assert rows.count() == page.locator("#trace-table tr.trace-failed").count()
    rows.first.locator("a.trace-link").click()
    page.wait_for_url(f"**/runs/{run_id}/traces/*/")
    assert "failed" in page.locator("#trace-outcome").inner_text()
    assert "simulated non-retryable failure" in page.locator("#trace-error").inner_text()
    assert page.locator(".trace-message").count() > 0  # the messages that were sent


def test_an_lm_answer_holding_script_stays_inert_in_the_trace_viewer(logged_in_page, live_stack):
    page = logged_in_page
    run_id = finished_small_run(page, live_stack, "XSS traces", "fake/xss")
    page.goto(f"/runs/{run_id}/traces/?role=prediction")
    outcome = page.locator("#trace-table tr.trace .trace-outcome").first
    assert "<script>window.__xss = 1</script>" in outcome.inner_text()
    page.locator("#trace-table tr.trace a.trace-link").first.click()
    page.wait_for_url(f"**/runs/{run_id}/traces/*/")
    response = page.locator("#trace-response")
    assert "<script>window.__xss = 1</script>" in response.inner_text()
    assert "<script>window.__xss = 1</script>" in page.locator("#trace-parsed").inner_text()
    assert page.locator("main script, .content script").count() == 0
    assert response.locator("script, b").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"


def test_trace_list_filters_by_role_candidate_and_failure(logged_in_page, live_stack):
    page = logged_in_page
    run_id = finished_small_run(page, live_stack, "Flaky filters", FLAKY)
    # from a candidate of the leaderboard: the validation predictions it was scored on
    page.locator("#run-leaderboard tr.candidate .candidate-traces a").first.click()
    page.wait_for_url(f"**/runs/{run_id}/traces/?candidate=*")
    candidate = page.locator("#filter-candidate").input_value()
    rows = page.locator("#trace-table tr.trace")
    assert candidate and rows.count() > 0
    assert {rows.nth(i).get_attribute("data-candidate") for i in range(rows.count())} == {candidate}
    # the form: role, then failed only
    page.goto(f"/runs/{run_id}/traces/")
    page.select_option("#filter-role", "prediction")
    page.check("#filter-failed")
    page.click("#apply-filters")
    page.wait_for_url("**failed=1*")
    rows = page.locator("#trace-table tr.trace")
    assert rows.count() > 0
    assert (
        rows.count() == page.locator('#trace-table tr.trace-failed[data-role="prediction"]').count()
    )
    page.click("#clear-filters")
    page.wait_for_url(f"**/runs/{run_id}/traces/")
    assert page.locator("#trace-table tr.trace:not(.trace-failed)").count() > 0


@pytest.mark.parametrize("width", [1280, 390])
def test_errors_panel_and_trace_viewer_fit_the_screen(logged_in_page, live_stack, width):
    page = logged_in_page
    page.set_viewport_size({"width": width, "height": 900})
    run_id = finished_small_run(page, live_stack, f"Flaky {width}", FLAKY)
    scroll_to(page, "#run-traces")
    assert page.locator("#error-groups").is_visible()
    screenshot(page, f"errors-panel-{width}")
    page.goto(f"/runs/{run_id}/traces/?failed=1")
    assert fits_the_width(page)
    screenshot(page, f"trace-list-{width}")
    page.locator("#trace-table a.trace-link").first.click()
    page.wait_for_url(f"**/runs/{run_id}/traces/*/")
    assert fits_the_width(page)
    screenshot(page, f"trace-detail-{width}")
