"""The run page's selection summary ("k of n candidates beat the seed") after an OMEGA run,
and the "loading models" phase, at desktop and phone widths.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep the screenshots.
"""

from __future__ import annotations

import pytest
from helpers_runs import fits_the_width, open_rules_omega_run, screenshot, scroll_to, shell

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)
FAIL_STAND_IN = """
from training.execution.liveness.reaper import mark_worker_lost
print(mark_worker_lost({run_id}, "the test's stand-in run: no worker held it"))
"""


def test_selection_summary_and_loading_phase_at_both_widths(logged_in_page, live_stack):
    page = logged_in_page
    run_id = open_rules_omega_run(page, live_stack, "Rules", 0.01, epochs=2, evaluations=(1, 1))
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=90_000)
    summary = page.locator("#run-selection")
    summary.wait_for()
    assert "beat the seed beyond noise" in summary.inner_text()
    count = summary.locator(".beat-seed")
    assert count.inner_text().startswith(f"{count.get_attribute('data-beat-seed')} of ")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.reload()
        summary.wait_for()
        assert fits_the_width(page), width
        scroll_to(page, "#run-selection")
        screenshot(page, f"run-selection-{width}")

    # a run whose worker still loads its models (the state is set here, as execution sets it)
    loading_id = shell(
        live_stack,
        f"""
from django.utils import timezone
from training.models import Run
run = Run.objects.get(pk={run_id}); run.pk = None; run.status = Run.RUNNING
run.phase = 'loading models'; run.heartbeat_at = timezone.now(); run.selection = {{}}
run.save(); print(run.pk)
""",
    )
    try:
        page.goto(f"/runs/{loading_id}/")
        status = page.locator("#run-status")
        assert status.locator(".run-phase").inner_text() == "loading models"
        assert "still loading the local models" in status.inner_text()
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.reload()
            assert fits_the_width(page), width
            screenshot(page, f"run-loading-models-{width}")
    finally:
        # No worker holds this stand-in: a cancel would wait for the reaper (stale limit +
        # its period, ~45 s of the next test's set-up); end it as the reaper would.
        shell(live_stack, FAIL_STAND_IN.format(run_id=loading_id))
