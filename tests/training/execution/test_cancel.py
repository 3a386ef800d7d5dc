"""Cancel: immediate for a queued run, reaches the worker of a run it claimed meanwhile,
and leaves a finished run alone."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from tests.training.conftest import make_program, make_run, run_config
from training.engine.testing import FakeLanguageModel
from training.execution import attempt as execution
from training.execution import run_state
from training.models import Run
from training.runs import launch as runs

pytestmark = pytest.mark.django_db(transaction=True)


def test_cancel_of_a_run_claimed_meanwhile_still_reaches_the_worker(user, program, demo_dataset):
    run = make_run(user, program, demo_dataset)
    seen_by_the_view = Run.objects.get(pk=run.pk)
    assert seen_by_the_view.status == Run.QUEUED
    assert run_state.claim(run.pk, run.attempt, "w@host")  # the worker wins the race

    runs.request_cancel(seen_by_the_view)

    run.refresh_from_db()
    assert run.status == Run.RUNNING and run.cancel_requested is True
    assert run_state.cancel_requested(run.pk)


def test_cancel_of_a_queued_run_is_still_immediate(user, program, demo_dataset):
    run = make_run(user, program, demo_dataset)
    runs.request_cancel(run)
    run.refresh_from_db()
    assert run.status == Run.CANCELLED and run.cancel_requested and run.finished_at
    assert execution.execute(run.pk, run.attempt) == "skipped"


def test_cancel_leaves_a_finished_run_alone(user, program, demo_dataset):
    run = make_run(user, program, demo_dataset, status=Run.SUCCEEDED)
    runs.request_cancel(run)
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED and not run.cancel_requested


def _press_cancel_once_in_flight(
    in_flight: threading.Event, run_id: int, pressed: dict
) -> threading.Thread:
    """Cancel as the view does, from another thread, once an LM call is in flight."""

    def press():
        assert in_flight.wait(60), "no LM call started"
        pressed["at"] = time.perf_counter()
        runs.request_cancel(Run.objects.get(pk=run_id))
        connection.close()

    thread = threading.Thread(target=press, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    "phase, overrides",
    [
        ("before evaluation", {"evaluations_before": 1}),
        ("training", {"evaluations_before": 0}),
    ],
)
def test_cancel_interrupts_calls_in_flight_in_every_phase(
    user, demo_dataset, phase, overrides, monkeypatch
):
    """Each LM call takes 60 s: cancel must not wait for a batch (or an evaluation) to end."""
    in_flight = threading.Event()
    making_request = FakeLanguageModel._request_of

    async def noting_the_call(self, *args, **kwargs):
        in_flight.set()  # the call is made: it now waits out its 60 s latency
        return await making_request(self, *args, **kwargs)

    monkeypatch.setattr(FakeLanguageModel, "_request_of", noting_the_call)
    program = make_program(user, demo_dataset, model="fake/fewshot?latency=60")
    run = make_run(user, program, demo_dataset, run_config(**overrides))
    pressed = {}
    presser = _press_cancel_once_in_flight(in_flight, run.pk, pressed)
    assert execution.execute(run.pk, run.attempt) == Run.CANCELLED, phase
    stopped = time.perf_counter()
    presser.join()
    assert stopped - pressed["at"] < execution.CANCEL_CHECK_SECONDS + 3.0, phase
    run.refresh_from_db()
    assert run.status == Run.CANCELLED and run.evaluations.count() == 0
    assert run.epoch_logs.count() == 0


def test_an_htmx_cancel_leaves_the_page_to_its_stream(client_user, user, program, demo_dataset):
    """Out-of-band fragments in the answer raced the stream's copy: when the stream replaced
    the Cancel button first, htmx found no #run-status (console: htmx:oobErrorNoTarget)."""
    from django.urls import reverse

    run = make_run(user, program, demo_dataset)
    response = client_user.post(
        reverse("training:run-cancel", args=[run.pk]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 204 and response.content == b""
    run.refresh_from_db()
    assert run.status == Run.CANCELLED
