"""In Chromium, under the Content-Security-Policy every page carries: the pages a member uses
(home, datasets, a dataset, programs, the launch form, a finished run with its charts, the
runs list, settings) load with no policy violation and no console error; the dataset page's
"Delete dataset" still asks first (a data-confirm, not an inline handler)."""

from __future__ import annotations

import pytest
from helpers_runs import demo_dataset_id, finished_small_run

pytestmark = pytest.mark.browser

VIOLATIONS = """() => {
  window.__violations = [];
  document.addEventListener("securitypolicyviolation",
    (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
}"""


def test_pages_load_under_the_policy_without_a_violation(logged_in_page, live_stack):
    page = logged_in_page
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.add_init_script(f"({VIOLATIONS})()")
    run_id = finished_small_run(page, live_stack, "csp run", "fake/fewshot?latency=0.01")
    dataset_id = demo_dataset_id(live_stack)
    paths = [
        "/",
        "/datasets/",
        f"/datasets/{dataset_id}/",
        "/programs/",
        "/runs/new/",
        "/runs/",
        f"/runs/{run_id}/",
        "/settings/",
    ]
    for path in paths:
        response = page.goto(path)
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.__violations") == [], path
    assert errors == []


def test_deleting_a_dataset_still_asks_first(logged_in_page, live_stack):
    page = logged_in_page
    dataset_id = demo_dataset_id(live_stack)
    page.goto(f"/datasets/{dataset_id}/")
    asked: list[str] = []

    def dismiss(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.click("text=Delete dataset")
    assert asked == ["Delete this dataset and its rows?"]
    assert page.url.endswith(f"/datasets/{dataset_id}/")  # dismissed: nothing was posted
    assert page.request.get(f"/datasets/{dataset_id}/").status == 200
