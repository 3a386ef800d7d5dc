"""The run page's section outline: five anchors (overview, examples, candidates and
evolution, calls and spend, steer) that work without JavaScript, stay on screen while the page
scrolls, and leave every live section in the page; at 390 px a table wider than its box says
it scrolls, and the correction buttons in it can be pressed.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep screenshots of a running and a finished run page at
1280 and 390 px."""

from __future__ import annotations

import pytest
from helpers_runs import finished_small_run, launch_demo_run, screenshot

from tests.conftest import session_cookie

pytestmark = pytest.mark.browser

SECTIONS = {
    "Overview": "section-overview",
    "Examples": "section-examples",
    "Candidates and evolution": "section-candidates",
    "Calls and spend": "section-spend",
    "Steer": "section-steer",
}
#: Each section holds the live parts a reader goes there for.
LIVE_PARTS = {
    "section-overview": ["#run-status", "#run-evaluations", "#run-epochs"],
    "section-examples": ["#run-examples"],
    "section-candidates": ["#run-leaderboard", "#population-section", "#lineage-section"],
    "section-spend": ["#run-forecast-actual", "#run-usage", "#run-spend", "#run-traces"],
    "section-steer": ["#run-steering"],
}


def follow_each_anchor(page, run_id: int) -> None:
    """Press each anchor of the outline in turn: the URL names the section, its top lies just
    under the outline (or the page is scrolled to its end), and the outline stays at the top."""
    landed = (
        "(id) => { const n = document.getElementById('run-sections').getBoundingClientRect();"
        " const s = document.getElementById(id).getBoundingClientRect();"
        " const bottom = window.scrollY + window.innerHeight >="
        " document.documentElement.scrollHeight - 1;"
        " return (s.top >= n.bottom - 1 && s.top <= n.bottom + 40) || bottom; }"
    )
    for label, section_id in SECTIONS.items():
        page.locator("#run-sections").get_by_role("link", name=label, exact=True).click()
        page.wait_for_url(f"**/runs/{run_id}/#{section_id}")
        page.wait_for_function(landed, arg=section_id, timeout=5_000)
        nav = page.locator("#run-sections").bounding_box()
        assert 0 <= nav["y"] < 200  # on screen
        if label != "Overview":  # sticky: scrolled down, the outline is at the window's top
            assert page.evaluate("window.scrollY") > 0
            assert nav["y"] <= 1


@pytest.mark.parametrize("width", (1280, 390))
def test_the_outline_works_without_javascript(browser, live_stack, width):
    context = browser.new_context(base_url=live_stack.url, java_script_enabled=False)
    try:
        context.add_cookies([session_cookie(live_stack)])
        page = context.new_page()
        page.set_default_timeout(15_000)
        run_id = launch_demo_run(live_stack, "Outline without JS", "fake/fewshot", epochs=1)
        page.set_viewport_size({"width": width, "height": 800})
        page.goto(f"/runs/{run_id}/")
        assert page.locator("#run-sections a").all_inner_texts() == list(SECTIONS)
        for section_id, parts in LIVE_PARTS.items():
            for part in parts:
                assert page.locator(f"#{section_id} {part}").count() == 1, part
        # The outline fits the phone's width: it scrolls inside itself, not the page.
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        follow_each_anchor(page, run_id)
    finally:
        context.close()


def test_every_section_stays_live_under_the_outline(logged_in_page, live_stack):
    """A reader who jumped to 'Calls and spend' while the run was paused sees it resume and end
    there and in every other section without a reload, with no console error
    (htmx:oobErrorNoTarget). The anchors are walked while the run is paused: a running run's
    live swaps may move the reader's section a moment after the jump."""
    page = logged_in_page
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # 0.2 s a call over six epochs: the pause lands inside training on a loaded machine too
    run_id = launch_demo_run(
        live_stack,
        "Outline live",
        "fake/fewshot?latency=0.2",
        evaluations=(1, 1),
        epochs=6,
        batch_size=8,
    )
    page.goto(f"/runs/{run_id}/")
    page.locator('#run-status .status-badge[data-status="running"]').wait_for(timeout=60_000)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, f"run-running-{width}")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.locator("#pause-run").click()
    page.locator('#run-status .status-badge[data-status="paused"]').wait_for(timeout=60_000)
    follow_each_anchor(page, run_id)
    page.locator("#run-sections a", has_text="Calls and spend").click()
    page.wait_for_function(  # the outline marks the section in view
        "() => document.querySelector('#run-sections a[href=\"#section-spend\"]')"
        ".getAttribute('aria-current') === 'true'"
    )
    page.locator("#resume-run").click()
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=120_000)
    page.locator("#section-spend #trace-summary").wait_for(timeout=10_000)
    page.locator("#section-examples #eval-table tr.eval-row").first.wait_for(timeout=10_000)
    assert "reload" not in page.locator("#section-spend").inner_text()
    follow_each_anchor(page, run_id)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, f"run-finished-{width}")
    assert errors == []


def test_tables_at_390_px_say_they_scroll_and_corrections_can_be_pressed(
    logged_in_page, live_stack
):
    page = logged_in_page
    page.set_viewport_size({"width": 390, "height": 800})
    finished_small_run(page, live_stack, "Outline phone", "fake/fewshot")
    box = page.locator("#run-examples .table-scroll").first
    box.wait_for()
    assert box.evaluate("b => b.scrollWidth > b.clientWidth")  # the table is wider than 390 px
    assert box.get_attribute("data-more") == "right"
    box.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
    page.wait_for_function(
        "() => document.querySelector('#run-examples .table-scroll').dataset.more === 'left'"
    )
    # The corrections table (steer) scrolls too; its buttons are on top where they stand.
    page.locator('#run-sections a[href="#section-steer"]').click()
    button = page.locator("#correction-samples button.mark-wrong-button").first
    button.wait_for()
    button.evaluate("b => b.scrollIntoView({block: 'center', inline: 'center'})")
    assert button.evaluate(
        "b => { const r = b.getBoundingClientRect();"
        " return b.contains(document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2)); }"
    )
    button.click()
    page.locator("#correction-samples .correction[data-pending='wrong']").wait_for()
