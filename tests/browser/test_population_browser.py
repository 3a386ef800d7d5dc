"""The population map, lineage and spend panels of a live OMEGA run, in a real browser.

The program's model is ``fake/rules`` with a little latency (tests/support/fake_models.py) and
``fake/embedding`` gives DNS its vectors, so a real Celery worker runs the fit in seconds while
the page is open: the map must gain points as each epoch's competition places them.
"""

from __future__ import annotations

import re

import pytest
from helpers_runs import open_rules_omega_run, unfold
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def points(page) -> int:
    return int(page.locator("#population-svg").get_attribute("data-points") or 0)


def test_the_map_grows_live_during_an_omega_run(logged_in_page, live_stack):
    page = logged_in_page
    # 0.1 s a call: the 4 epochs last several of the live renderer's 2 s candidate-picture
    # intervals (at 0.03 s the whole run took 2.7 s, one picture, and ended before the check).
    open_rules_omega_run(
        page, live_stack, "Rules map", 0.1, epochs=4, omega_merging_rate=0.5, evaluations=(1, 0)
    )
    unfold(page, "population", "lineage", "spend")  # folded by default: advanced sections
    svg = page.locator("#population-svg")
    running = page.locator('#run-status .status-badge[data-status="running"]')
    # the first competition places the first points while the run is still going
    expect(svg).to_have_attribute("data-points", re.compile(r"^[1-9]\d*$"), timeout=60_000)
    first = points(page)
    assert running.count() == 1, "the map was only drawn after the run had ended"
    # ... and later epochs add more, without a reload
    page.wait_for_function(
        f"() => Number(document.querySelector('#population-svg').dataset.total) > {first}",
        timeout=60_000,
    )
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=90_000)
    page.wait_for_function(
        "() => document.querySelectorAll('#population-svg circle.map-point').length"
        " == Number(document.querySelector('#population-svg').dataset.points)"
    )
    total = int(svg.get_attribute("data-total"))
    assert points(page) == total > first
    assert svg.locator("circle.status-dropped").count() >= 1
    assert svg.locator("circle.status-best").count() == 1
    assert svg.locator("line.map-edge").count() >= 1
    summary = page.locator("#population-summary").inner_text()
    assert f"{total} candidates on the map" in summary and "explain" in summary

    # the slider goes back to epoch 1: fewer points, then forward again
    slider = page.locator("#population-epoch")
    assert slider.get_attribute("max") == "4"
    slider.fill("1")
    assert 0 < points(page) < total
    expect(page.locator("#population-epoch-label")).to_have_text("1")
    slider.fill("4")
    assert points(page) == total

    # lineage: every candidate, a best path from the seed
    lineage = page.locator("#lineage-svg")
    expect(lineage).to_have_attribute("data-nodes", re.compile(r"^[1-9]\d*$"))
    assert lineage.locator("path.lineage-edge.best").count() >= 1
    assert lineage.locator('path.lineage-edge[data-operation="mutation"]').count() >= 1
    assert page.locator("#lineage-best-path").inner_text().startswith("c1")

    # spend by role, updated to the end
    spend = page.locator("#run-spend")
    for role in ("prediction", "mutation", "embedding"):
        assert spend.locator(f'tr.spend-row[data-role="{role}"]').count() == 1
    assert int(page.locator("#spend-total-calls").inner_text()) > 0
    assert page.locator("#spend-caps").count() == 0

    # hover shows the candidate (as text), click opens its page
    best = svg.locator("circle.status-best")
    best.hover()
    tip = page.locator("#population-tip")
    expect(tip).to_be_visible()
    candidate_id = best.get_attribute("data-candidate")
    assert tip.locator("strong").inner_text().startswith(f"{candidate_id} ·")
    best.click(force=True)
    page.wait_for_url("**/candidates/*/")
    assert candidate_id in page.content()
