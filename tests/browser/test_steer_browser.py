"""Steering in Chromium against the real server and worker: corrections made in the
per-example table (a label picked from the label set, marks before and after, undo) are
counted at once and publish v2 of the same dataset, which a new run uses by default; the
first run re-scored on v2 from its stored predictions, no LM call; a run that judged by people lists the examples people judged; a paused run (after the batch under way) frees its worker
and, resumed, finishes. No console error on any of these pages.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep screenshots at 1280 and 390 px.
"""

from __future__ import annotations

import json
import re

import pytest
from helpers_runs import (
    create_program,
    fits_the_width,
    launch_run,
    open_rules_omega_run,
    screenshot,
    shell,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def console_errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


def crafted_run(live_stack, name: str) -> tuple[int, int]:
    """A finished run on a new 12-example routing dataset ``name`` (tests.training's
    crafted predictions: example 3 regressed to "bug", 0 failed before...); (run, dataset)."""
    code = f"""
from django.contrib.auth import get_user_model
from tests.training.insight.helpers_eval_table import crafted_predictions, routing_dataset, seeded_run
user = get_user_model().objects.get(username='tester')
run = seeded_run(user, routing_dataset(user, test=12, name={name!r}), *crafted_predictions(12))
print(run.pk, run.dataset_id)
"""
    run_id, dataset_id = shell(live_stack, code).split()
    return int(run_id), int(dataset_id)


def row(page, index: int):
    return page.locator(f"#eval-correction-{index}")


def pending(page):
    return page.locator("#eval-pending")


def test_corrections_in_the_table_publish_v2_of_the_same_dataset(logged_in_page, live_stack):
    page = logged_in_page
    errors = console_errors(page)
    run_id, dataset_id = crafted_run(live_stack, "steer routing")
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("#eval-rows tr.eval-row")).to_have_count(12)
    expect(page.locator("#eval-rows .eval-correction")).to_have_count(12)
    # Example 3 said "bug" for "money": pick "money" (its own answer) and mark it wrong.
    labels = row(page, 3).locator("select option").all_inner_texts()
    assert sorted(labels[1:]) == ["box", "bug", "money"]
    row(page, 3).locator("select").select_option("money")
    row(page, 3).locator('button[value="wrong:after"]').click()
    expect(row(page, 3).locator('.eval-mark[data-phase="after"]')).to_have_attribute(
        "data-mark", "wrong"
    )
    expect(row(page, 3).locator(".correction-error")).to_have_count(0)
    expect(pending(page)).to_have_attribute("data-count", "1")
    # Right before training on example 0, then undone, then marked again.
    row(page, 0).locator('button[value="right:before"]').click()
    expect(pending(page)).to_have_attribute("data-count", "2")
    row(page, 0).locator('button[value="undo:before"]').click()
    expect(pending(page)).to_have_attribute("data-count", "1")
    row(page, 0).locator('button[value="right:before"]').click()
    expect(pending(page)).to_have_attribute("data-count", "2")
    # Example 4 ("bug", predicted "bug"): its right answer is "box" after all.
    row(page, 4).locator("select").select_option("box")
    row(page, 4).locator('button[value="wrong:after"]').click()
    expect(pending(page)).to_have_attribute("data-count", "4")
    expect(row(page, 4).locator(".corrected-answer")).to_have_text("box")
    expect(pending(page)).to_contain_text("3 marks, 1 answer")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert fits_the_width(page)
        screenshot(page, f"steer-table-{width}")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.click("#eval-publish")
    page.wait_for_url(re.compile(r"/datasets/\d+/$"))
    version_id = int(page.url.rstrip("/").split("/")[-1])
    assert version_id != dataset_id
    expect(page.locator("h1")).to_contain_text("steer routing")
    expect(page.locator("#dataset-version")).to_have_attribute("data-version", "2")
    versions = page.locator("#version-list tbody tr")
    expect(versions).to_have_count(2)
    log = page.locator('#version-list tr[data-version="2"] .change-log li')
    expect(log).to_have_count(4)
    assert set(log.locator(".change-author").all_inner_texts()) == {"tester"}
    screenshot(page, "steer-dataset-v2")
    # The first run, re-scored on v2 from its stored predictions: example 4 is "box" now.
    traces = "from training.models import LMCallTrace;print(LMCallTrace.objects.count())"
    calls_before = shell(live_stack, traces)
    page.goto(f"/runs/{run_id}/")
    page.select_option("#rescore-version", "2")
    page.click("#rescore-run")
    for phase in ("before", "after"):
        line = page.locator(f'#rescore-table tr[data-phase="{phase}"]')
        expect(line.locator(".rescore-old")).to_have_text("0.750")
        expect(line.locator(".rescore-new")).to_contain_text("0.667")
        expect(line.locator(".rescore-changed")).to_have_attribute("data-count", "1")
    assert shell(live_stack, traces) == calls_before  # no program call
    screenshot(page, "steer-rescored")
    # One dataset in the list, with two versions; a new run takes v2 unless pinned.
    page.goto("/datasets/")
    entry = page.locator("#dataset-list tr", has_text="steer routing")
    expect(entry).to_have_count(1)
    expect(entry).to_contain_text("v2")
    expect(entry).to_contain_text("(2 versions)")
    program_id = create_program(live_stack, "Steer program", "fake/fewshot", dataset_id)
    page.goto(f"/runs/new/?program={program_id}")
    chosen = page.locator("#id_dataset option:checked")
    assert chosen.get_attribute("value") == str(version_id)
    assert chosen.inner_text() == "steer routing (v2, latest)"
    # A run on v2 that judged by people lists the examples the marks scored.
    code = f"""
from datasets.models import Dataset
from tests.training.insight.helpers_eval_table import crafted_predictions, seeded_run
version = Dataset.objects.get(pk={version_id})
print(seeded_run(version.owner, version, *crafted_predictions(12), reward_human_marks=True).pk)
"""
    judged_run = int(shell(live_stack, code))
    page.goto(f"/runs/{judged_run}/")
    expect(page.locator("#run-dataset")).to_have_text("steer routing v2")
    # Marks: 0 right before, 3 wrong after, 4's "bug" wrong (before and after: v2 says "box").
    expect(page.locator("#eval-judged")).to_have_attribute("data-examples", "3")
    expect(page.locator("#eval-judged")).to_contain_text("(4 predictions)")
    page.click("#eval-judged-link")
    rows = page.locator("#eval-rows tr.eval-row")
    expect(rows).to_have_count(3)
    assert [rows.nth(i).get_attribute("data-index") for i in range(3)] == ["0", "3", "4"]
    expect(page.locator("#eval-rows .judged-badge")).to_have_count(4)
    screenshot(page, "steer-judged")
    assert errors == []


def test_a_paused_run_frees_its_worker_and_resumed_finishes(logged_in_page, live_stack):
    page = logged_in_page
    errors = console_errors(page)
    dataset_id = int(
        shell(
            live_stack,
            "from datasets.models import Dataset as D;"
            "print(D.objects.get(owner__username='tester', builtin_key='demo').pk)",
        )
    )
    # 0.2 s a call: training lasts long enough for the click to land inside it even when a
    # loaded machine is slow to open the page
    program_id = create_program(live_stack, "Pause me", "fake/fewshot?latency=0.2", dataset_id)
    run_id = launch_run(
        live_stack,
        program_id,
        dataset_id,
        epochs=8,
        batch_size=8,
        evaluations_before=1,
        evaluations_after=1,
    )
    page.goto(f"/runs/{run_id}/")
    page.locator("#pause-run").click()
    expect(page.locator("#run-status .status-badge")).to_have_attribute(
        "data-status", "paused", timeout=60_000
    )
    expect(page.locator("#run-paused")).to_contain_text("the worker is free")
    state = json.loads(
        shell(
            live_stack,
            "import json;from training.models import Run;"
            f"r=Run.objects.get(pk={run_id});"
            "print(json.dumps([r.status, r.checkpoint_position, r.epoch_logs.count(), r.attempt,"
            " r.batches_per_epoch]))",
        )
    )
    # Paused after the batch under way, inside its epoch (or at an epoch's end when the
    # click came while one ran): the epochs done are all logged, nothing of the epoch lost.
    status, point, logged, attempt, steps = state
    assert status == "paused" and attempt == 1 and point["epoch"] < 8
    assert logged == point["epoch"]
    if point["batch"]:  # each batch's rewards kept (the epoch's last batch may be smaller)
        assert 8 * (point["batch"] - 1) < len(point["rewards"]) <= 8 * point["batch"]
        expect(page.locator("#run-paused")).to_contain_text(
            f"in epoch {point['epoch'] + 1} of 8, after batch {point['batch']} of {steps}"
        )
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert fits_the_width(page)
        screenshot(page, f"steer-paused-{width}")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.locator("#resume-run").click()
    expect(page.locator("#run-status .status-badge")).to_have_attribute(
        "data-status", "succeeded", timeout=120_000
    )
    done = json.loads(
        shell(
            live_stack,
            "import json;from training.models import Run;"
            f"r=Run.objects.get(pk={run_id});"
            "print(json.dumps([r.status, r.attempt, list(r.epoch_logs.values_list('epoch', flat=True)),"
            " r.evaluations.filter(phase='before').count()]))",
        )
    )
    assert done == ["succeeded", 2, list(range(8)), 1]
    assert errors == []


def test_a_candidate_by_hand_joins_a_live_omega_population(logged_in_page, live_stack):
    page = logged_in_page
    errors = console_errors(page)
    run_id = open_rules_omega_run(page, live_stack, "By hand", 0.05, epochs=200)
    seed = page.locator("#run-leaderboard tr.candidate").first
    seed.wait_for(timeout=60_000)
    page.goto(
        f"/runs/{run_id}/candidates/"
        + shell(
            live_stack,
            f"from training.models import Candidate;print(Candidate.objects.filter(run_id={run_id}).order_by('pk').first().pk)",
        )
        + "/"
    )
    page.click("#hand-candidate")
    page.fill("#hand-instructions", "Route each message to money, bug or box, by hand.")
    # An example of one's own: refused until it fits the program's fields, then in the diff.
    page.fill("#hand-new-inputs", '{"text": "My parcel never came"}')
    page.fill("#hand-new-outputs", '{"team": "box"}')
    page.click("#hand-preview")
    expect(page.locator("#hand-error")).to_contain_text("no field 'text'")
    expect(page.locator("#hand-diff")).to_have_count(0)
    page.fill("#hand-new-inputs", '{"message": "My parcel never came"}')
    page.click("#hand-preview")
    expect(page.locator("#hand-diff")).to_contain_text("by hand.")
    expect(page.locator("#hand-diff")).to_contain_text("My parcel never came")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert fits_the_width(page)
        screenshot(page, f"steer-by-hand-diff-{width}")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.click("#hand-add")
    page.wait_for_url(re.compile(rf"/runs/{run_id}/$"))
    row = page.locator('#run-leaderboard tr.candidate[data-operation="by_hand"]')
    expect(row).to_have_count(1, timeout=60_000)
    expect(row.locator(".candidate-operation")).to_have_text("by hand")
    state = json.loads(
        shell(
            live_stack,
            "import json;from training.models import Candidate, Run;"
            f"c=Candidate.objects.get(run_id={run_id}, operation='by_hand');"
            f"print(json.dumps([c.reward is not None, c.value['instructions'], c.value['examples'][-1], Run.objects.get(pk={run_id}).hand_candidates.get().state]))",
        )
    )
    assert state == [
        True,
        "Route each message to money, bug or box, by hand.",
        {"inputs": {"message": "My parcel never came"}, "outputs": {"team": "box"}},
        "added",
    ]
    page.locator("#cancel-run").click()
    expect(page.locator("#run-status .status-badge")).to_have_attribute(
        "data-status", "cancelled", timeout=60_000
    )
    lineage = page.locator('#lineage-svg [data-operation="by_hand"]')
    expect(lineage.first).to_be_attached(timeout=30_000)
    assert errors == []
