"""A run watched to its end with no reload shows the same figures as a reloaded page (issue
27.1): every section of the run page is a live part, drawn by the same partial."""

from __future__ import annotations

import re

import pytest
from helpers_runs import launch_demo_run

pytestmark = pytest.mark.browser

#: The sections a watcher reads; each must read the same live and after a reload.
SECTIONS = (
    "#run-evaluations",
    "#run-examples",
    "#run-traces",
    "#run-usage",
    "#run-spend",
    "#run-epochs",
    "#run-leaderboard",
    "#run-forecast-actual",
    "#run-candidate-confidence",
)


def section_texts(page) -> dict[str, str]:
    return {
        selector: re.sub(r"\s+", " ", page.locator(selector).inner_text()).strip()
        for selector in SECTIONS
    }


def test_a_run_watched_to_its_end_reads_like_the_reloaded_page(logged_in_page, live_stack):
    page = logged_in_page
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    run_id = launch_demo_run(
        live_stack,
        "Watched",
        "fake/fewshot?latency=0.05",
        evaluations=(1, 1),
        epochs=3,
        batch_size=12,
    )
    page.goto(f"/runs/{run_id}/")
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=120_000)
    page.wait_for_timeout(1500)  # the run's last update (every part) lands
    # A finished run's examples section loads its re-score form on its own (hx-trigger load):
    # read both pages once it is there.
    page.locator("#run-rescore-box #rescore-form").wait_for()
    # The Selection section came with the finish: where the final prompt came from, which
    # only a finished run shows (the page loaded it while the run was going).
    assert page.locator("#run-candidate-confidence #provenance").count() == 1
    watched = section_texts(page)
    assert "reload" not in " ".join(watched.values())
    rows = page.locator("#eval-table tr.eval-row").count()
    assert rows > 0  # the per-example table came live, not with a reload
    assert page.locator("#trace-summary").count() == 1
    # The legend draws each curve as a flat swatch with the curve's own dash.
    legend = page.evaluate(
        "() => { const c = Chart.getChart('history-chart'); return {height:"
        " c.options.plugins.legend.labels.boxHeight, items: c.legend.legendItems.map("
        "(i) => [i.text, i.lineDash])}; }"
    )
    assert legend["height"] == 0
    assert dict(legend["items"]) == {"training reward": [], "validation reward": [6, 4]}
    page.reload()
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for()
    page.locator("#run-rescore-box #rescore-form").wait_for()
    # loaded once the page is up, in the Selection section (folded: attached, not shown)
    page.locator("#run-candidate-confidence #provenance").wait_for(state="attached")
    assert section_texts(page) == watched
    assert errors == []
