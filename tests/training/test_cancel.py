"""Cancel: immediate for a queued run, reaches the worker of a run it claimed meanwhile,
and leaves a finished run alone."""

from __future__ import annotations

import pytest

from training.models import Run
from training.services import execution, run_state, runs

from .conftest import run_config

pytestmark = pytest.mark.django_db(transaction=True)


def test_cancel_of_a_run_claimed_meanwhile_still_reaches_the_worker(user, program, demo_dataset):
    run = Run.objects.create(owner=user, program=program, dataset=demo_dataset, config=run_config())
    seen_by_the_view = Run.objects.get(pk=run.pk)
    assert seen_by_the_view.status == Run.QUEUED
    assert run_state.claim(run.pk, run.attempt, "w@host")  # the worker wins the race

    runs.request_cancel(seen_by_the_view)

    run.refresh_from_db()
    assert run.status == Run.RUNNING and run.cancel_requested is True
    assert run_state.cancel_requested(run.pk)


def test_cancel_of_a_queued_run_is_still_immediate(user, program, demo_dataset):
    run = Run.objects.create(owner=user, program=program, dataset=demo_dataset, config=run_config())
    runs.request_cancel(run)
    run.refresh_from_db()
    assert run.status == Run.CANCELLED and run.cancel_requested and run.finished_at
    assert execution.execute(run.pk, run.attempt) == "skipped"


def test_cancel_leaves_a_finished_run_alone(user, program, demo_dataset):
    run = Run.objects.create(
        owner=user,
        program=program,
        dataset=demo_dataset,
        config=run_config(),
        status=Run.SUCCEEDED,
    )
    runs.request_cancel(run)
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED and not run.cancel_requested
