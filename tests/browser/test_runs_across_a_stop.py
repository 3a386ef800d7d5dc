"""A stop of Trainboard pauses the runs its worker executes at their next batch, and the next
start resumes them: on the live stack (a real worker, broker and database), through the same
commands ``make run`` calls (``stop_runs pause`` on a stop, ``prepare`` at a start)."""

from __future__ import annotations

import pytest
from helpers_runs import launch_demo_run, run_field, shell

from tests.support.waiting import until

pytestmark = pytest.mark.browser


def test_a_stop_pauses_a_running_run_and_the_next_start_resumes_it(live_stack):
    stack = live_stack.stack
    # each batch takes its calls' 2 s, two epochs of them: the run is still running when the
    # stop command (a new Django process, several seconds to start on a loaded machine) asks
    # it to pause
    run_id = launch_demo_run(
        live_stack, "Across a stop", "fake/fewshot?latency=2", epochs=2, batch_size=9
    )
    until(
        lambda: run_field(live_stack, run_id, "current_batch") >= 1,
        60,
        "the run finished a batch",
        poll=0.2,
    )
    paused = stack.manage("stop_runs", "pause", "--worker", f"{stack.worker_name}@", "--wait", "30")
    assert paused.stdout.strip() == (
        "paused 1 of 1 running run at the next batch; they resume at the next start"
    )
    assert run_field(live_stack, run_id, "status") == "paused"
    assert run_field(live_stack, run_id, "resume_at_start") is True
    assert run_field(live_stack, run_id, "pause_requested") is False  # answered

    started = stack.manage("prepare")
    assert f"resumed 1 run(s) paused by the last stop: [{run_id}]" in started.stdout
    assert run_field(live_stack, run_id, "resume_at_start") is False
    until(
        lambda: run_field(live_stack, run_id, "status") == "succeeded",
        90,
        lambda: f"the resumed run succeeded, not {run_field(live_stack, run_id, 'status')}",
        poll=0.5,
    )
    epochs = shell(
        live_stack,
        f"from training.models import EpochLog;print(sorted(EpochLog.objects.filter(run_id={run_id}).values_list('epoch', flat=True)))",
    )
    assert epochs == "[0, 1]"
    assert run_field(live_stack, run_id, "attempt") == 2


def test_a_run_its_owner_paused_stays_paused_across_a_stop(live_stack):
    stack = live_stack.stack
    run_id = launch_demo_run(
        live_stack, "Owner paused", "fake/fewshot?latency=0.2", epochs=3, batch_size=9
    )
    shell(
        live_stack,
        f"from training.models import Run;from training.runs.launch import request_pause;"
        f"print(request_pause(Run.objects.get(pk={run_id})).pk)",
    )
    until(
        lambda: run_field(live_stack, run_id, "status") == "paused",
        60,
        lambda: f"the run paused, not {run_field(live_stack, run_id, 'status')}",
        poll=0.2,
    )
    paused = stack.manage("stop_runs", "pause", "--worker", f"{stack.worker_name}@", "--wait", "5")
    assert paused.stdout.strip() == ""
    started = stack.manage("prepare")
    assert "paused by the last stop" not in started.stdout
    assert run_field(live_stack, run_id, "status") == "paused"
    assert run_field(live_stack, run_id, "resume_at_start") is False
