"""A queued run says why it waits: the workers are busy (with which runs), its
position in the queue, or that no worker is running at all."""

from __future__ import annotations

import html as html_lib
import re

import pytest

from core import worker_status
from tests.training.conftest import make_program, make_run
from training.insight import live
from training.models import Run

pytestmark = pytest.mark.django_db


def status_text(run: Run) -> str:
    html = live.render_parts(run, ("status",), oob=False)
    return html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip())


@pytest.fixture
def a_worker_beats():
    beacon = worker_status.Beacon("celery@busy")
    beacon.mark_ready()  # a worker that has loaded its models and takes runs
    beacon.beat()
    worker_status.forget()
    yield
    worker_status._client(worker_status.settings.REDIS_URL).zrem(
        worker_status.BEACON_KEY, "celery@busy"
    )
    worker_status.forget()


def test_a_queued_run_names_the_runs_holding_the_workers_and_its_place(
    user, demo_dataset, a_worker_beats
):
    program = make_program(user, demo_dataset)
    first = make_run(user, program, demo_dataset, status=Run.RUNNING)
    second = make_run(user, program, demo_dataset, status=Run.RUNNING)
    make_run(user, program, demo_dataset)  # queued before ours
    ours = make_run(user, program, demo_dataset)
    text = status_text(ours)
    assert f"Waiting for a worker: 2 runs hold the worker (#{first.pk}, #{second.pk})." in text
    assert "Position 2 in the queue: 1 run launched before it starts first." in text


def test_a_queued_run_with_no_worker_says_none_is_running(user, demo_dataset):
    worker_status.forget()
    ours = make_run(user, make_program(user, demo_dataset), demo_dataset)
    text = status_text(ours)
    assert "Waiting for a worker: none is running" in text
    assert "Next in the queue" in text


def test_a_queued_run_behind_a_starting_worker_says_it_is_loading_models(user, demo_dataset):
    beacon = worker_status.Beacon("celery@starting")
    beacon.beat()  # beats "starting" until worker_ready and its models are loaded
    worker_status.forget()
    try:
        ours = make_run(user, make_program(user, demo_dataset), demo_dataset)
        text = status_text(ours)
        assert "Waiting for the worker: it is starting (loading models)." in text
        assert "none is running" not in text
    finally:
        worker_status._client(worker_status.settings.REDIS_URL).zrem(
            worker_status.BEACON_KEY, "celery@starting"
        )
        worker_status.forget()


def test_a_queued_run_while_redis_is_away_blames_the_broker_not_the_workers(
    user, demo_dataset, settings
):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    worker_status.forget()
    try:
        ours = make_run(user, make_program(user, demo_dataset), demo_dataset)
        text = status_text(ours)
        assert "Waiting: Redis (the broker) cannot be reached" in text
        assert "none is running" not in text and "make run" not in text
    finally:
        worker_status.forget()
