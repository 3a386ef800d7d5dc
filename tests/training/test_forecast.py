"""The launch form's forecast: counted from the configuration, measured by a trial, stored at
launch and compared with what the run did."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.urls import reverse

from training.execution import attempt as execution
from training.execution import forecast as forecast_services
from training.models import Run
from training.runs import launch as runs

from .conftest import make_program, run_config
from .test_views import launch_data

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def no_broker(monkeypatch):
    """Launches and trials are executed here, in the test: record what would be sent."""
    sent = []

    def record(args, **options):
        sent.append(args)
        return type("R", (), {"id": f"t{len(sent)}"})()

    monkeypatch.setattr("training.execution.tasks.execute_run.apply_async", record)
    monkeypatch.setattr(forecast_services.forecast_trial, "apply_async", record)
    return sent


def measured(program, dataset, mutation_model="") -> dict:
    """Run the real trial (as the worker task does) and cache it like the form's poll."""
    result = forecast_services.run_trial(program, dataset, mutation_model)
    key = forecast_services.trial_key(program, dataset, mutation_model)
    return forecast_services._remember(key, result)


@pytest.mark.parametrize("optimizer", ["RandomFewShot", "OMEGA"])
def test_a_finished_run_lands_within_the_forecast_it_stored_at_launch(
    user, demo_dataset, optimizer, no_broker
):
    program = make_program(user, demo_dataset, model="fake/rules")
    config = run_config(
        optimizer=optimizer,
        model="fake/rules",
        omega_embedding_model="fake/minilm",
        epochs=2,
        batch_size=4,
        evaluations_before=1,
        evaluations_after=1,
    )
    state = measured(program, demo_dataset, forecast_services.optimizer_model(config))
    assert state["state"] == "ready"
    if optimizer == "OMEGA":  # its mutation measured on its model
        assert state["trial"]["optimizer_tokens_per_call"] == 15
    else:
        assert state["trial"]["optimizer_call_seconds"] is None
    run = runs.launch(user, program, demo_dataset, config)
    stored = Run.objects.get(pk=run.pk).forecast
    assert stored["state"] == "ready" and stored["seconds"]["low"] > 0
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    run.refresh_from_db()
    assert stored["calls"]["low"] <= run.lm_calls <= stored["calls"]["high"]
    rows = {row["label"]: row for row in forecast_services.comparison(run)}
    assert rows["LM calls"]["actual"] == str(run.lm_calls)
    assert rows["LM calls"]["error"] == round(
        100 * (run.lm_calls - stored["calls"]["expected"]) / stored["calls"]["expected"]
    )
    assert set(rows) == {"LM calls", "Tokens", "Cost", "Time"}


def test_the_trial_measures_tokens_and_price_of_the_programs_model(user, demo_dataset):
    program = make_program(user, demo_dataset, model="fake/fewshot")
    result = forecast_services.run_trial(program, demo_dataset)
    trial = result["trial"]
    assert trial["calls"] == 3  # one alone, a batch of two (the warm-up is not measured)
    assert trial["tokens_per_call"] == 15  # the fake's 10 prompt + 5 completion tokens
    assert trial["cost_per_call"] == 0.0


def test_an_unreachable_model_is_said_in_words_not_numbers(client_user, user, demo_dataset):
    program = make_program(user, demo_dataset, model="fake/unreachable")
    state = measured(program, demo_dataset)
    assert state["state"] == "error"
    assert state["message"].startswith("the model cannot be reached:")
    html = client_user.get(
        reverse("training:run-forecast"), launch_data(program, demo_dataset)
    ).content.decode()
    assert "Tokens, cost and time unknown: the model cannot be reached" in html
    assert re.search(r"Forecast:</strong> about \d+ calls</p>", html)  # calls only


def forecast_html(client, program, dataset, **overrides) -> str:
    response = client.get(
        reverse("training:run-forecast"), launch_data(program, dataset, **overrides)
    )
    assert response.status_code == 200
    return response.content.decode()


def calls_in(html: str) -> int:
    return int(re.search(r'data-calls="(\d+)"', html).group(1))


def test_the_form_forecast_follows_the_epochs_and_measures_once(
    client_user, program, demo_dataset, no_broker
):
    first = forecast_html(client_user, program, demo_dataset, epochs="1")
    assert "Measuring the model" in first and len(no_broker) == 1  # a worker was asked
    forecast_html(client_user, program, demo_dataset, epochs="1")
    assert len(no_broker) == 1  # still pending: not asked twice
    measured(program, demo_dataset)
    one = forecast_html(client_user, program, demo_dataset, epochs="1")
    three = forecast_html(client_user, program, demo_dataset, epochs="3")
    assert calls_in(three) > calls_in(one)
    assert re.search(r"about \d+ calls, \d+ (k )?tokens, \$0\.00, \d+–\d+ (s|min)", three)
    assert "Measuring" not in three


def test_an_incomplete_form_says_what_is_missing(client_user, program, demo_dataset):
    html = forecast_html(client_user, program, demo_dataset, epochs="0")
    assert "Forecast: epochs: must be" in html
    assert "data-calls" not in html


def test_another_users_program_gets_no_forecast(client, other_user, program, demo_dataset):
    client.force_login(other_user)
    html = forecast_html(client, program, demo_dataset)
    assert "Select a valid choice" in html and "data-calls" not in html


def test_the_launch_form_stores_the_forecast_and_the_caps(
    client_user, user, program, demo_dataset, no_broker, django_capture_on_commit_callbacks
):
    measured(program, demo_dataset)
    with django_capture_on_commit_callbacks(execute=True):
        client_user.post(
            reverse("training:run-create"),
            launch_data(program, demo_dataset, budget_calls="50", budget_minutes="2.5"),
        )
    run = Run.objects.get(owner=user)
    assert run.config["budget_calls"] == 50 and run.config["budget_minutes"] == 2.5
    assert run.config["budget_cost"] is None
    assert run.forecast["state"] == "ready" and run.forecast["calls"]["expected"] > 0
    page = client_user.get(run.get_absolute_url()).content.decode()
    assert "Forecast at launch" in page and "Cap on LM calls" in page


def test_the_form_warns_when_a_calls_cap_is_below_the_forecast(
    client_user, program, demo_dataset, no_broker
):
    plain = forecast_html(client_user, program, demo_dataset, epochs="2")
    total = calls_in(plain)
    assert "forecast-cap-warning" not in plain
    roomy = forecast_html(client_user, program, demo_dataset, epochs="2", budget_calls=str(total))
    assert "forecast-cap-warning" not in roomy  # a cap at the forecast: no warning
    html = forecast_html(
        client_user, program, demo_dataset, epochs="2", budget_calls=str(total // 2)
    )
    warning = re.search(
        r"forecast-cap-warning[^>]*>This cap \((\d+) LM calls\) is below the forecast \((\d+)\): "
        r"it stops the run after about (\d+) of (\d+) batches",
        html,
    )
    assert warning, html
    cap, forecast_total, done, batches = map(int, warning.groups())
    assert (cap, forecast_total) == (total // 2, total)
    assert 0 < done < batches
    tiny = forecast_html(client_user, program, demo_dataset, epochs="2", budget_calls="3")
    assert "it leaves no calls for training" in tiny


def test_an_omega_launch_before_its_mutation_is_measured_still_forecasts_time(
    user, demo_dataset, no_broker
):
    # The OMEGA run page said "the forecast has calls only": its own trial (with a
    # mutation) was not cached yet at launch, though the program's was.
    program = make_program(user, demo_dataset, model="fake/rules")
    measured(program, demo_dataset)  # the program's trial only (a RandomFewShot form)
    config = run_config(optimizer="OMEGA", model="fake/rules", omega_embedding_model="fake/minilm")
    stored = forecast_services.at_launch(program, demo_dataset, config)
    assert stored["state"] == "ready" and stored["mutations_assumed"] is True
    assert stored["seconds"]["expected"] > 0 and stored["tokens"]["expected"] > 0
    assert stored["parts"]["optimizer"]["expected"] > 0  # the mutations are in the time
