"""Runs in Chromium against the real server and Celery worker.

Fast tests use a scripted fake LM (``fake/…`` model strings, resolved by
tests/support/fake_models.py in the worker); the ``slow`` one trains the real local model.
"""

from __future__ import annotations

import os
import signal

import pytest
from helpers_runs import (
    ENDLESS,
    create_program,
    demo_dataset_id,
    launch_demo_run,
    launch_run,
    open_advanced,
    run_field,
    shell,
    tiny_dataset_id,
)

from tests.support.waiting import until

pytestmark = pytest.mark.browser


def fill_launch_form(
    page, epochs: int, batch_size: int, evaluations: int = 2, validation_split: str = "0.25"
):
    page.select_option("#id_optimizer", "RandomFewShot")  # a label set opens CalibratedLabels
    page.fill("#id_epochs", str(epochs))
    page.fill("#id_batch_size", str(batch_size))
    page.fill("#id_validation_split", validation_split)
    open_advanced(page)
    page.fill("#id_seed", "3")
    page.fill("#id_evaluations_before", str(evaluations))
    page.fill("#id_evaluations_after", str(evaluations))
    page.check("#id_metrics input[value=F1Score]") if page.locator(
        "#id_metrics input[value=F1Score]"
    ).count() else None
    page.click("#launch")
    page.wait_for_url("**/runs/*/")


def wait_status(page, status: str, timeout: float = 60_000):
    page.locator(f'#run-status .status-badge[data-status="{status}"]').wait_for(timeout=timeout)


def test_create_program_launch_watch_live_and_compare(logged_in_page, live_stack):
    page = logged_in_page
    dataset_id = demo_dataset_id(live_stack)
    # Build the program in the browser.
    page.goto("/programs/new/")
    page.fill("#id_name", "Browser router")
    page.select_option("#id_dataset", str(dataset_id))
    page.select_option("#id_module", "Generator")
    page.fill("#id_instructions", "Route the message.")
    # a call takes 0.4 s: each epoch scores a new candidate, so epoch 2 comes a second or
    # more after epoch 0 (its training predictions are memoised while the seed holds)
    page.fill("#id_model", "fake/fewshot?latency=0.4")
    page.click("#program-form button[type=submit]")
    page.wait_for_url("**/programs/*/")
    assert page.locator("h1").inner_text() == "Browser router"
    # Launch a run from the program page.
    page.click("#launch-run")
    fill_launch_form(page, epochs=3, batch_size=9)
    first_url = page.url
    page.evaluate("window.__sameDocument = true")
    # Epoch rows appear without reloading the page.
    page.locator('#run-epochs tr[data-epoch="0"]').wait_for(timeout=60_000)
    assert page.locator('#run-epochs tr[data-epoch="2"]').count() == 0
    page.locator('#run-epochs tr[data-epoch="2"]').wait_for(timeout=60_000)
    wait_status(page, "succeeded")
    assert page.evaluate("window.__sameDocument") is True
    assert page.locator("#history-chart").get_attribute("data-points") == "3"
    # Before/after on the test split: the difference with its paired bootstrap interval (two
    # identical evaluations at temperature 0 show no std), and the bar chart.
    reward_row = page.locator('#run-evaluations tr[data-metric="reward"]').inner_text()
    assert "(2 identical evaluations)" in reward_row and "±" not in reward_row
    assert "paired bootstrap over 12 test examples" in reward_row
    run_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    noise = shell(
        live_stack,
        "from training.execution.summaries import paired_test_difference as p;"
        "from training.models import Evaluation as E;"
        f"print(p(E.objects.filter(run_id={run_id}))['within_noise'])",
    )
    assert ("within noise" if noise == "True" else "beyond noise") in reward_row
    assert page.locator("#before-after-chart").count() == 1
    assert page.locator("#run-leaderboard tr.candidate").count() >= 2
    assert int(page.locator("#usage-calls").inner_text()) > 0
    # Hovering the chart shows values (Chart.js tooltip).
    page.locator("#history-chart").scroll_into_view_if_needed()  # mouse coordinates: on screen
    box = page.locator("#history-chart").bounding_box()
    page.mouse.move(box["x"] + box["width"] - 30, box["y"] + box["height"] / 2)
    page.wait_for_function(
        "() => window.TBCharts.history.tooltip.getActiveElements().length > 0", timeout=5_000
    )
    # A second run, then compare both.
    page.goto(
        first_url.replace("/runs/", "/runs/new/?program=").split("?")[0]
        + "?program="
        + page.locator("#run-page a").first.get_attribute("href").strip("/").split("/")[-1]
    )
    fill_launch_form(page, epochs=2, batch_size=9, evaluations=1)
    wait_status(page, "succeeded")
    page.goto("/runs/")
    checkboxes = page.locator("#run-list input[name=runs]")
    checkboxes.nth(0).check()
    checkboxes.nth(1).check()
    page.click("#compare-selected")
    page.wait_for_url("**/compare/?runs=*")
    page.locator("#compare-history-chart").wait_for()
    page.wait_for_function(
        "() => window.TBCharts.compareHistory && window.TBCharts.compareHistory.data.datasets.length >= 2"
    )
    differing = page.locator("#compare-config tr.config-differs").all_inner_texts()
    assert any("epochs" in row for row in differing)
    assert page.locator("#compare-bars-chart").count() == 1


def test_script_in_an_lm_answer_shows_as_text(logged_in_page, live_stack):
    page = logged_in_page
    run_id = launch_demo_run(
        live_stack, "XSS", "fake/xss", epochs=1, batch_size=36, evaluations=(1, 1)
    )
    page.goto(f"/runs/{run_id}/")
    wait_status(page, "succeeded")
    prediction = page.locator("#run-samples td.prediction").first
    assert "<script>window.__xss = 1</script>" in prediction.inner_text()
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert prediction.locator("script").count() == 0


def test_cancel_and_two_runs_progress_together(logged_in_page, live_stack):
    page = logged_in_page
    dataset_id = demo_dataset_id(live_stack)
    program_id = create_program(live_stack, "Slow", "fake/fewshot?latency=0.2", dataset_id)
    # The runs must still be going when Cancel is pressed.
    a, b = (launch_run(live_stack, program_id, dataset_id, **ENDLESS) for _ in range(2))
    until(
        lambda: all(run_field(live_stack, r, "current_epoch") >= 1 for r in (a, b)),
        60,
        "both runs finished an epoch",
        poll=0.5,
    )
    assert run_field(live_stack, a, "status") == run_field(live_stack, b, "status") == "running"
    assert run_field(live_stack, a, "worker_pid") != run_field(live_stack, b, "worker_pid")
    for run_id in (a, b):
        page.goto(f"/runs/{run_id}/")
        page.click("#cancel-run")
        wait_status(page, "cancelled", timeout=30_000)
        assert page.locator("#resume-run").count() == 1
        assert page.locator("#run-epochs tr").count() >= 2  # header + kept history


def test_killed_worker_process_is_resumed_without_a_person_and_finishes(logged_in_page, live_stack):
    page = logged_in_page
    # 0.3 s a call: an epoch with new prompts takes ~3 s (the first two and, after the kill,
    # the resumed one), so epoch 2 is still running when epoch 1's row shows and the kill lands
    # mid-run; at 1 s a call the same run took 40 s.
    run_id = launch_demo_run(
        live_stack,
        "Killable",
        "fake/fewshot?latency=0.3",
        epochs=6,
        batch_size=9,
        evaluations=(1, 1),
    )
    page.goto(f"/runs/{run_id}/")
    page.locator('#run-epochs tr[data-epoch="1"]').wait_for(timeout=60_000)
    pid = run_field(live_stack, run_id, "worker_pid")
    os.kill(pid, signal.SIGKILL)
    page.locator("#run-auto-resumed").wait_for(timeout=60_000)
    assert (
        "resumed it without you, from its last checkpoint"
        in page.locator("#run-auto-resumed").inner_text()
    )
    wait_status(page, "succeeded", timeout=60_000)
    epochs = [
        int(v)
        for v in page.locator("#run-epochs tr[data-epoch]").evaluate_all(
            "rows => rows.map(r => r.dataset.epoch)"
        )
    ]
    assert epochs == [0, 1, 2, 3, 4, 5]  # no epoch lost, none run twice
    assert run_field(live_stack, run_id, "attempt") == 2
    assert run_field(live_stack, run_id, "auto_resumes") == 1


@pytest.mark.slow
def test_local_model_small_run_end_to_end(logged_in_page, live_stack):
    """The real local model (smollm2 via llama-cpp) on a 4+2-row dataset, from the browser."""
    page = logged_in_page
    dataset_id = tiny_dataset_id(live_stack)
    page.goto("/programs/new/")
    page.fill("#id_name", "Local router")
    page.select_option("#id_dataset", str(dataset_id))
    page.fill("#id_instructions", "Answer with the team code name: ledger, wrench or parcel.")
    assert page.input_value("#id_model") == "local/smollm2"
    page.fill("#id_max_tokens", "24")
    page.click("#program-form button[type=submit]")
    page.wait_for_url("**/programs/*/")
    page.click("#launch-run")
    fill_launch_form(page, epochs=2, batch_size=4, evaluations=1, validation_split="0")
    page.locator('#run-epochs tr[data-epoch="0"]').wait_for(timeout=300_000)
    wait_status(page, "succeeded", timeout=300_000)
    assert page.locator('#run-evaluations tr[data-metric="reward"]').count() == 1
    assert int(page.locator("#usage-calls").inner_text()) > 0
