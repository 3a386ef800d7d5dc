"""NearestFewShot from the launch form to the candidate page, and a run that did not learn
pointing to it, in Chromium against the live stack (its worker on the scripted fake models:
``fake/fewshot`` answers its prompt's examples' majority, ``fake/embedding`` embeds by words),
at desktop and phone widths.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep the screenshots.
"""

from __future__ import annotations

import re

import pytest
from helpers_runs import (
    fits_the_width,
    launch_demo_run,
    launch_from_form,
    open_advanced,
    open_launch_form,
    screenshot,
    scroll_to,
)

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)


def wait_succeeded(page) -> None:
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=90_000)


def test_launch_nearest_few_shot_from_the_form_and_see_its_pool(logged_in_page, live_stack):
    page = logged_in_page
    open_launch_form(page, live_stack, "Nearest router", "fake/fewshot", "NearestFewShot")
    # choosing it shows its own fields and hides the others'
    assert page.locator("#id_nfs_k").is_visible()
    assert not page.locator("#id_rfs_nb_max_examples").is_visible()
    assert "most like the input" in page.locator("#field-optimizer .hint").inner_text()
    page.fill("#id_nfs_k", "3")
    page.fill("#id_epochs", "1")
    page.fill("#id_validation_split", "0.25")  # 9 rows: the pool's gain is told from noise
    open_advanced(page)
    page.fill("#id_seed", "7")
    page.fill("#id_nfs_embedding_model", "fake/embedding")
    page.locator("#forecast-embeddings").wait_for(timeout=30_000)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        assert fits_the_width(page), width
        screenshot(page, f"nearest-form-{width}")
    run_id = launch_from_form(page)

    wait_succeeded(page)
    page.reload()
    before, after = (
        float(text)
        for text in re.findall(r"\d\.\d+", page.locator("#run-evaluations").inner_text())[:2]
    )
    assert after > before
    assert int(page.locator("#run-selection .beat-seed").get_attribute("data-beat-seed")) == 1
    assert page.locator("#run-next-steps").count() == 0
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.reload()
        assert fits_the_width(page), width
        scroll_to(page, "#run-leaderboard")
        screenshot(page, f"nearest-run-{width}")

    page.click('#run-leaderboard tr[data-operation="few_shot"] td a')
    page.wait_for_url(re.compile(rf"/runs/{run_id}/candidates/\d+/$"))
    summary = page.locator("#retrieval-summary").inner_text()
    assert re.search(r"Each input gets the 3 nearest of \d+ pooled training examples", summary)
    assert page.locator("#retrieval-rows tbody tr").count() == 5
    assert '"vector"' not in page.content()
    assert "nearest of" in page.locator("#candidate-diff").inner_text()
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.reload()
        assert fits_the_width(page), width
        screenshot(page, f"nearest-candidate-{width}")


def test_a_run_that_did_not_learn_says_so_and_links_to_the_next_steps(logged_in_page, live_stack):
    page = logged_in_page
    # fake/echo leaves the team empty whatever the examples: no candidate beats the seed
    config = {"optimizer": "RandomFewShot", "epochs": 2, "batch_size": 8, "seed": 7}
    run_id = launch_demo_run(live_stack, "Echo router", "fake/echo", evaluations=(1, 1), **config)
    page.goto(f"/runs/{run_id}/")
    wait_succeeded(page)
    badge = page.locator("#run-status .status-badge")
    assert badge.get_attribute("data-outcome") == "no_better"
    assert badge.inner_text() == "No better than the seed"
    happened = page.locator("#run-happened").inner_text()
    assert "scored better than the starting program beyond noise, so the run kept it" in happened
    steps = page.locator("#run-next-steps")
    steps.wait_for()
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.reload()
        assert fits_the_width(page), width
        scroll_to(page, "#run-status")
        screenshot(page, f"run-happened-{width}")
        scroll_to(page, "#run-next-steps")
        screenshot(page, f"next-steps-{width}")

    # the page's deferred sections load after a reload and move the link down: click it once
    # they are in
    page.wait_for_load_state("networkidle")
    page.click('#run-next-steps a[data-step-link="more_epochs"]')
    page.wait_for_url(re.compile(r"/runs/new/\?"))
    assert page.locator("#id_optimizer").input_value() == "RandomFewShot"
    assert page.locator("#id_epochs").input_value() == "4"
    screenshot(page, "next-steps-prefilled-form")
