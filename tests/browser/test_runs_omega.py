"""OMEGA from the launch form, and the reaper with nobody watching, against the real stack.

The program's model is ``fake/rules`` (tests/support/fake_models.py): OMEGA's mutations add rules
learnt from wrong answers, its crossovers merge them, and ``fake/embedding`` gives DNS its
distances, so a real Celery worker runs a whole OMEGA fit in seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from helpers_runs import (
    fill_fields,
    launch_demo_run,
    launch_from_form,
    open_advanced,
    open_launch_form,
    run_field,
    shell,
)

from tests.support.waiting import until

pytestmark = pytest.mark.browser


def test_omega_run_from_the_launch_form_shows_its_evolution(logged_in_page, live_stack):
    page = logged_in_page
    open_launch_form(page, live_stack, "Rules", "fake/rules?latency=0.01", "OMEGA")
    # choosing OMEGA unfolds its parameters
    assert page.locator('fieldset[data-optimizer="OMEGA"]').evaluate("d => !d.hidden") is True
    assert page.locator('fieldset[data-optimizer="RandomFewShot"]').evaluate("d => d.hidden")
    assert page.input_value("#id_omega_language_model") == ""  # blank: the program's model
    open_advanced(page)
    fill_fields(page, omega_embedding_model="fake/embedding", omega_population_size=4)
    fill_fields(page, omega_merging_rate=0.5, epochs=3, batch_size=8, validation_split=0.25, seed=7)
    launch_from_form(page)
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=60_000)

    board = page.locator("#run-leaderboard")
    assert board.locator('tr.candidate[data-operation="mutation"]').count() >= 1
    assert board.locator('tr.candidate[data-operation="crossover"]').count() >= 1
    assert board.locator('.status-count[data-status="kept"]').count() == 1
    assert board.locator('.status-count[data-status="dropped"]').count() == 1
    assert board.locator("tr.candidate.status-best").count() == 1
    novelty = board.locator("tr.candidate.status-kept td").nth(7).inner_text()
    assert novelty.strip() not in ("", "—")
    # a mutation's page: linked parent and a diff with the rule it added
    row = board.locator('tr.candidate[data-operation="mutation"]').first
    parent_id = row.locator("td.candidate-parents").inner_text().strip()
    row.locator("td a").first.click()
    page.wait_for_url("**/candidates/*/")
    assert page.locator("#candidate-parents a").first.inner_text() == parent_id
    added = page.locator("#candidate-diff .diff-add").all_inner_texts()
    assert any("answer team=" in line for line in added), added


def test_a_run_whose_whole_worker_died_resumes_with_no_page_open(live_stack):
    """kill -9 the whole worker (main process and pool: a lost host) once the run has a
    checkpoint: the reaper alone marks the run lost and queues it again from that checkpoint;
    the next worker finishes it, each epoch run once."""
    stack = live_stack.stack
    run_id = launch_demo_run(
        live_stack,
        "Orphan",
        "fake/fewshot?latency=0.2",
        epochs=4,
        batch_size=9,
        evaluations=(0, 1),
    )
    until(
        lambda: run_field(live_stack, run_id, "checkpoint__epoch") is not None,
        60,
        "the run completed an epoch",
        poll=0.2,
    )
    reaper = subprocess.Popen(  # as make run starts it, with a short staleness for the test
        [stack.python, "manage.py", "reap_runs", "--every", "2"],
        cwd=stack.base_dir,
        env={**stack.env, "TRAINBOARD_HEARTBEAT_STALE_SECONDS": "6"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = stack.procs["worker"]
    try:
        os.killpg(worker.pid, signal.SIGKILL)  # its own session: main process and pool children
        worker.wait(10)
        killed_at = time.monotonic()
        until(
            lambda: run_field(live_stack, run_id, "auto_resumes") != 0,
            6 + 2 + 10,
            "the reaper resumed it",
            poll=0.5,
        )
        assert run_field(live_stack, run_id, "status") == "queued"
        assert run_field(live_stack, run_id, "attempt") == 2
    finally:
        reaper.send_signal(signal.SIGTERM)
        reaper.wait(15)
        stack.start_worker()  # the other browser tests share this stack
        stack.wait_for_worker(timeout=60)
    until(
        lambda: run_field(live_stack, run_id, "status") == "succeeded",
        120 - (time.monotonic() - killed_at),
        lambda: f"the resumed run succeeded, not {run_field(live_stack, run_id, 'status')}",
        poll=0.5,
    )
    epochs = shell(
        live_stack,
        f"from training.models import EpochLog;print(sorted(EpochLog.objects.filter(run_id={run_id}).values_list('epoch', flat=True)))",
    )
    assert epochs == "[0, 1, 2, 3]"
