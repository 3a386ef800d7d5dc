"""What a run's status says about its failed predictions.

Every prediction of an evaluation or of an epoch failed: the run fails with the first error.
Some failed: it succeeds and says "N of M predictions failed", with each distinct error and
its count. A model whose provider key the server lacks is refused at launch, naming the
variable, and fails at once (not 748 failed calls later) if it runs anyway.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from datasets.services import get_split
from tests.training.conftest import make_program, make_run, run_config
from training.execution import attempt as execution
from training.models import Run
from training.runs.forms import RunForm

pytestmark = pytest.mark.django_db(transaction=True)

ALWAYS_FAILS = "fake/fewshot?failure_rate=1&failure=fatal"


def launch(user, program, dataset, **overrides):
    return make_run(user, program, dataset, run_config(**overrides))


def test_an_evaluation_whose_predictions_all_failed_fails_the_run(user, demo_dataset):
    program = make_program(user, demo_dataset, model=ALWAYS_FAILS)
    run = launch(user, program, demo_dataset, evaluations_before=2)
    assert execution.execute(run.pk, run.attempt) == Run.FAILED
    run.refresh_from_db()
    assert run.error.startswith("All ")
    assert "predictions of the before-training evaluation 1 failed. First error: " in run.error
    assert "simulated non-retryable failure (HTTP 400)" in run.error
    assert run.evaluations.count() == 0 and run.epoch_logs.count() == 0
    assert run.usage["predictions"] == run.failed_predictions > 0
    assert run.usage["predictions"] == len(get_split(demo_dataset, "test")[0])


def test_an_epoch_whose_predictions_all_failed_fails_the_run(user, demo_dataset):
    program = make_program(user, demo_dataset, model=ALWAYS_FAILS)
    run = launch(user, program, demo_dataset, evaluations_before=0, epochs=3)
    assert execution.execute(run.pk, run.attempt) == Run.FAILED
    run.refresh_from_db()
    assert "predictions of training epoch 1 failed. First error: " in run.error
    assert list(run.epoch_logs.values_list("epoch", flat=True)) == [0]  # no epoch 2 or 3


def test_a_run_with_some_failures_succeeds_and_says_how_many_and_why(user, demo_dataset, client):
    program = make_program(
        user, demo_dataset, model="fake/fewshot?failure_rate=0.3&failure=fatal&seed=5"
    )
    run = launch(user, program, demo_dataset, evaluations_before=1, evaluations_after=1)
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    assert run.error == ""
    made, failed = run.usage["predictions"], run.failed_predictions
    assert 0 < failed < made
    errors = run.usage["prediction_errors"]
    assert sum(count for _, count in errors) == failed
    assert all("HTTP 400" in message for message, _ in errors)
    client.force_login(user)
    page = client.get(reverse("training:run-detail", args=[run.pk])).content.decode()
    assert f"{failed} of {made} predictions failed" in page
    assert "simulated non-retryable failure (HTTP 400)" in page


def test_missing_provider_key_fails_the_run_at_once_naming_the_variable(
    user, demo_dataset, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    program = make_program(user, demo_dataset, model="openai/gpt-4o-mini")
    run = launch(user, program, demo_dataset, model="openai/gpt-4o-mini")
    assert execution.execute(run.pk, run.attempt) == Run.FAILED
    run.refresh_from_db()
    assert "OPENAI_API_KEY" in run.error and "Missing credentials" in run.error
    assert "not retried" in run.error  # and fit/evaluate stopped at the first call


def test_the_launch_form_refuses_a_model_whose_key_is_missing(user, demo_dataset, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    program = make_program(user, demo_dataset, model="openai/gpt-4o-mini")
    data = {"program": program.pk, "dataset": demo_dataset.pk, "reward": "ExactMatch"}
    form = RunForm(data=data, user=user)
    assert not form.is_valid()
    assert form.errors["program"] == [
        "model 'openai/gpt-4o-mini' needs OPENAI_API_KEY in the server's environment, which "
        "is not set: ask the administrator to set it, or put the program on a saved endpoint"
    ]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000000000")
    assert "program" not in RunForm(data=data, user=user).errors
