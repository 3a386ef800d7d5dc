"""A queued run survives a Redis that restarts and forgets its message.

A live stack of its own (web, worker, reaper, database) on a private Redis that keeps nothing
on disk. With the worker stopped, a run is launched: its message waits in Redis. Redis is
restarted, empty; the worker comes back. The reaper finds the queued run's task neither in
the queue nor reserved, sends it again, and the run finishes, instead of reading "queued" for
good beside an idle worker.

The module's tests share the stack and its Redis (a stack's start is most of their cost);
each begins by stopping the worker and the reaper and emptying the broker's queue (whatever
the test before left there), and ends with both running again.
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
import redis

from tests.browser.helpers_runs import demo_program, launch_run, run_field, shell
from tests.conftest import start_live_stack
from tests.private_redis import running_private_redis
from tests.support.waiting import until

REAPER_EVERY = 1.0  # seconds between the reaper's passes (make run: 15)
RUN = {"epochs": 1, "batch_size": 12, "evaluations_before": 0, "evaluations_after": 0}


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory):
    with running_private_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="module")
def stack_on_private_redis(private_redis):
    var_dir = Path(tempfile.mkdtemp(prefix="tb-forgotten-"))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REDIS_URL", private_redis.url)
        live, stop = start_live_stack(var_dir, concurrency=1)
    try:
        yield live
    finally:
        stop()
        shutil.rmtree(var_dir, ignore_errors=True)


def stop_child(stack, name: str) -> None:
    proc = stack.procs[name]
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)


def waiting_messages(url: str) -> int:
    return redis.Redis.from_url(url).llen("celery")


def nobody_takes_runs(stack, url: str) -> None:
    """Stop the worker and the reaper, empty the broker's queue and its reserved set, and
    start a reaper that passes every :data:`REAPER_EVERY` seconds: a run launched now waits."""
    stop_child(stack, "worker")
    stop_child(stack, "reaper")
    redis.Redis.from_url(url).delete("celery", "unacked", "unacked_index")
    stack.start_reaper(every=REAPER_EVERY)


def test_a_run_queued_when_redis_restarts_is_sent_again_and_finishes(
    stack_on_private_redis, private_redis
):
    live = stack_on_private_redis
    stack = live.stack
    nobody_takes_runs(stack, private_redis.url)  # the run's message waits in Redis

    dataset_id, program_id = demo_program(live, "Forgotten", "fake/fewshot")
    run_id = launch_run(live, program_id, dataset_id, **RUN)
    first_task = run_field(live, run_id, "task_id")
    assert first_task
    assert waiting_messages(private_redis.url) == 1
    # A message that waits in the queue is never sent twice, however many passes see it.
    passes = "from training.execution.liveness.forgotten_runs import ForgottenRuns as F;f=F();print([f.send_again() for _ in range(3)])"
    assert shell(live, passes) == "[[], [], []]"
    assert waiting_messages(private_redis.url) == 1

    private_redis.restart()
    assert waiting_messages(private_redis.url) == 0
    stack.start_worker()
    stack.wait_for_worker(timeout=60)

    until(
        lambda: run_field(live, run_id, "status") not in ("queued", "running"),
        90,
        lambda: f"run ended after Redis restarted: {run_field(live, run_id, 'status')}",
        poll=0.5,
    )
    assert run_field(live, run_id, "status") == "succeeded"
    assert run_field(live, run_id, "task_id") != first_task
    reaper_log = (stack.log_dir / "reaper.log").read_text()
    assert f"run {run_id} attempt 1: the broker lost its message; sending it again" in reaper_log


def hold_like_a_dead_worker(url: str) -> None:
    """Move the waiting message into the broker's reserved set, as a worker does when it
    takes one (kombu's ``unacked`` hash and its index), and never give it back: a worker
    killed with -9 right after taking it."""
    client = redis.Redis.from_url(url)
    raw = client.lpop("celery")
    message = json.loads(raw)
    tag = message["properties"]["delivery_tag"]
    client.hset("unacked", tag, json.dumps([message, "", "celery"]))
    client.zadd("unacked_index", {tag: time.time()})


def test_a_run_whose_message_a_dead_worker_held_is_sent_again_and_finishes(
    stack_on_private_redis, private_redis
):
    live = stack_on_private_redis
    stack = live.stack
    nobody_takes_runs(stack, private_redis.url)
    dataset_id, program_id = demo_program(live, "Held", "fake/fewshot")
    run_id = launch_run(live, program_id, dataset_id, **RUN)
    first_task = run_field(live, run_id, "task_id")
    hold_like_a_dead_worker(private_redis.url)
    assert waiting_messages(private_redis.url) == 0
    stack.start_worker()
    stack.wait_for_worker(timeout=60)
    until(
        lambda: run_field(live, run_id, "status") not in ("queued", "running"),
        90,
        "run ended: the held message was replaced",
        poll=0.5,
    )
    assert run_field(live, run_id, "status") == "succeeded"
    assert run_field(live, run_id, "task_id") != first_task
