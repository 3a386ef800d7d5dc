"""Re-score without re-running, in Chromium against the real server: a
finished run whose candidates kept their validation predictions; a correction made in the
per-example table on a test row and one on a validation row publish v2; re-scored on v2 the page shows the
test figures and every candidate's old and new score side by side and which changed rank,
and the trace count of LM calls does not move (no program call). A judge reward shows its
forecast and a confirm first. No console error.

The validation row is corrected in the same table (its split selector: test · validation).
Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep screenshots at 1280 and 390 px.
"""

from __future__ import annotations

import pytest
from helpers_runs import fits_the_width, screenshot, shell
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

TRACES = "from training.models import LMCallTrace;print(LMCallTrace.objects.count())"


def test_a_correction_gives_v2_and_a_rescore_changes_figures_and_a_candidate_rank(
    logged_in_page, live_stack
):
    page = logged_in_page
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    code = """
from django.contrib.auth import get_user_model
from tests.training.insight.helpers_eval_table import (
    crafted_predictions, routing_dataset, seeded_run, validation_teams, scoring_positions)
user = get_user_model().objects.get(username='tester')
dataset = routing_dataset(user, test=12, train=10, name='rescore routing')
truth = validation_teams(seeded_run(user, dataset, *crafted_predictions(12)))
wrong = [t for t in ('money', 'bug', 'box') if t != truth[1]][0]
run = seeded_run(user, dataset, *crafted_predictions(12),
                 candidates={'c1': truth, 'c2': [truth[0], wrong]})
train = list(dataset.rows.filter(split='train').order_by('index').values_list('index', flat=True))
print(run.pk, train[scoring_positions(len(train), 0.2)[1]], wrong)
"""
    run_id, validation_index, wrong = shell(live_stack, code).split()
    page.goto(f"/runs/{run_id}/")
    # Example 4 ("bug", predicted "bug" before and after): its right answer is "box".
    correction = page.locator("#eval-correction-4")
    correction.locator("select").select_option("box")
    correction.locator('button[value="wrong:after"]').click()
    expect(page.locator("#eval-pending")).to_have_attribute("data-count", "2")  # answer, mark
    # The validation rows, the same table's other split: validation example 1 (the seed
    # predicted its team) gets the answer c2 gave.
    page.click('#eval-splits a[data-split="validation"]')
    expect(page.locator("#eval-table")).to_have_attribute("data-split", "validation")
    expect(page.locator("#eval-rows tr.eval-row")).to_have_count(2)
    validation = page.locator("#eval-correction-validation-1")
    validation.locator("select").select_option(wrong)
    validation.locator("button.answer-button").click()
    expect(page.locator("#eval-pending")).to_have_attribute("data-count", "3")
    expect(page.locator("#eval-correction-validation-1 .corrected-answer")).to_have_text(wrong)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert fits_the_width(page)
        page.locator("#run-examples h2").scroll_into_view_if_needed()
        screenshot(page, f"validation-rows-{width}")
    page.set_viewport_size({"width": 1280, "height": 900})
    recorded = shell(
        live_stack,
        f"""
from datasets import versions
from training.models import Run
run = Run.objects.get(pk={run_id})
print(versions.pending(run.owner, run.dataset).filter(kind='answer', row_index={validation_index}).count())
""",
    )
    assert recorded == "1"  # on the training row the optimizer scored as validation row 1
    page.click("#eval-publish")
    expect(page.locator("#dataset-version")).to_have_attribute("data-version", "2")
    calls_before = shell(live_stack, TRACES)
    page.goto(f"/runs/{run_id}/")
    page.select_option("#rescore-version", "2")
    page.click("#rescore-run")
    after = page.locator('#rescore-table tr[data-phase="after"]')
    expect(after.locator(".rescore-old")).to_have_text("0.750")
    expect(after.locator(".rescore-new")).to_contain_text("0.667")
    c1 = page.locator('#rescore-candidates tr[data-candidate="c1"]')
    c2 = page.locator('#rescore-candidates tr[data-candidate="c2"]')
    expect(c1).to_have_attribute("data-rank-changed", "yes")
    expect(c1.locator(".cand-old")).to_have_text("1.000 (#1)")
    expect(c1.locator(".cand-new")).to_contain_text("0.500 (#2)")
    expect(c2.locator(".cand-rank")).to_have_text("#2 → #1")
    expect(c2.locator(".cand-new")).to_contain_text("1.000 (#1)")
    assert shell(live_stack, TRACES) == calls_before  # no program call
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert fits_the_width(page)
        screenshot(page, f"rescore-candidates-{width}")
    page.set_viewport_size({"width": 1280, "height": 900})
    # A judge: its forecast and a confirm, nothing called yet.
    page.select_option("#rescore-reward", "LMAsJudge")
    page.locator("#run-rescore details summary").click()
    page.fill("#rescore-judge-model", "fake/judge")
    page.fill("#rescore-criteria", "the right team")
    page.click("#rescore-run")
    expect(page.locator("#rescore-judge-calls")).to_have_attribute("data-calls", "26")
    expect(page.locator("#rescore-judge-go")).to_be_visible()
    screenshot(page, "rescore-judge-forecast")
    assert shell(live_stack, TRACES) == calls_before
    assert errors == []
