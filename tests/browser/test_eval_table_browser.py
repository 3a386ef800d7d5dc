"""The per-example evaluation table and confusion matrices in Chromium against the real
server and worker: the table filters to regressions, a matrix cell filters the table, an LM
prediction holding ``<script>`` stays text, and the run and compare pages fit 1280 and
390 px.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep screenshots of the run page's table and matrices
and of the compare page at both widths.
"""

from __future__ import annotations

import pytest
from helpers_runs import finished_small_run, fits_the_width, screenshot, scroll_to, shell
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def seeded_run(live_stack, name: str) -> int:
    """A finished run on a 30-example routing split whose stored evaluations regressed on
    examples 3 and 6, failed on 9 and improved on 0, 1, 2 (the worker's own write path)."""
    code = f"""
from django.contrib.auth import get_user_model
from tests.training.insight.helpers_eval_table import LABELS, routing_dataset, seeded_run
user = get_user_model().objects.get(username='tester')
truth = [LABELS[i % 3] for i in range(30)]
before = list(truth); before[0], before[1], before[2] = 'box', None, 'bug'
after = list(truth); after[3], after[6], after[9] = 'bug', 'bug', None
print(seeded_run(user, routing_dataset(user, test=30, name={name!r}), before, after).pk)
"""
    return int(shell(live_stack, code))


def test_the_table_filters_to_regressions(logged_in_page, live_stack):
    page = logged_in_page
    run_id = seeded_run(live_stack, "regressions")
    page.goto(f"/runs/{run_id}/")
    rows = page.locator("#eval-rows tr.eval-row")
    expect(rows).to_have_count(25)  # the first page
    page.locator('#eval-counts a.state-link[data-state="regressed"]').click()
    expect(page.locator("#eval-matching")).to_contain_text("2 of 30 examples")
    expect(rows).to_have_count(2)
    assert [rows.nth(i).get_attribute("data-index") for i in range(2)] == ["3", "6"]
    assert {rows.nth(i).get_attribute("data-state") for i in range(2)} == {"regressed"}
    # the search form keeps the state and narrows further
    page.fill("#eval-search", "message 6 ")
    page.click("#eval-apply")
    expect(rows).to_have_count(1)
    assert rows.first.get_attribute("data-index") == "6"
    # the row leads to that example's LM calls
    href = rows.first.locator("a.eval-traces").get_attribute("href")
    assert href == f"/runs/{run_id}/traces/?split=test&example=6"
    page.click("#eval-clear")
    expect(rows).to_have_count(25)


def test_a_confusion_matrix_cell_filters_the_table(logged_in_page, live_stack):
    page = logged_in_page
    finished_small_run(page, live_stack, "Matrix", "fake/fewshot")
    after = page.locator('#confusion .confusion-phase[data-phase="after"]')
    expect(after).to_be_visible()
    cell = after.locator("td.confused a.confusion-link").first
    count = int(cell.inner_text())
    expected, predicted = cell.get_attribute("data-expected"), cell.get_attribute("data-predicted")
    cell.click()
    expect(page.locator("#eval-cell-filter")).to_contain_text(expected)
    rows = page.locator("#eval-rows tr.eval-row")
    expect(rows).to_have_count(min(count, 25))
    for i in range(rows.count()):
        assert rows.nth(i).locator(".eval-expected").inner_text() == expected
        # an empty answer is shown "(empty)", as the matrix names it
        shown = rows.nth(i).locator(".eval-after .prediction").inner_text() or "(empty)"
        assert shown == predicted


def test_a_prediction_holding_script_stays_inert(logged_in_page, live_stack):
    page = logged_in_page
    finished_small_run(page, live_stack, "XSS table", "fake/xss")
    prediction = page.locator("#eval-rows tr.eval-row .eval-after .prediction").first
    assert "<script>window.__xss = 1</script>" in prediction.inner_text()
    assert prediction.locator("script, b").count() == 0
    assert page.locator("#eval-table script").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
    # and after an htmx swap of the table too
    page.locator('#eval-counts a.state-link[data-state="same"]').click()
    expect(page.locator("#eval-rows tr.eval-row").first).to_be_visible()
    assert page.locator("#eval-table script, #eval-table b").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"


@pytest.mark.parametrize("width", [1280, 390])
def test_run_and_compare_pages_fit_the_screen(logged_in_page, live_stack, width):
    page = logged_in_page
    page.set_viewport_size({"width": width, "height": 900})
    first = finished_small_run(page, live_stack, f"Few-shot {width}", "fake/fewshot")
    scroll_to(page, "#run-examples")
    assert page.locator("#confusion").is_visible() and page.locator("#eval-rows").is_visible()
    assert fits_the_width(page)
    screenshot(page, f"run-page-table-{width}")
    second = finished_small_run(page, live_stack, f"Rules {width}", "fake/rules")
    page.goto(f"/compare/?runs={first}&runs={second}")
    expect(page.locator("#compare-learned .learned-column")).to_have_count(2)
    assert fits_the_width(page)
    screenshot(page, f"compare-{width}")
