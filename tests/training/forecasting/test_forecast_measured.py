"""The measured forecast: every run a worker ends leaves what it observed per call in its
model's pace row, and the next forecast's tokens and time come from those observations (its
calls as counted)."""

from __future__ import annotations

import pytest

from tests.training.conftest import make_program, run_config
from training.execution import attempt as execution
from training.execution.pace import calibration, measured
from training.models import Run
from training.runs import launch as runs


def observed(program, dataset, config) -> dict:
    """The launch form's forecast, its tokens and time from recent runs' observations."""
    from training.execution import forecast as forecasts

    return forecasts.forecast(program, dataset, config, measure=False, observed=True)


pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "fake/rules?latency=0.03"


@pytest.fixture
def no_broker(monkeypatch):
    monkeypatch.setattr(
        "training.execution.tasks.execute_run.apply_async",
        lambda args, **options: type("R", (), {"id": "t"})(),
    )
    monkeypatch.setattr(measured, "SAMPLE_SECONDS", 0.01)


def test_a_finished_run_is_observed_and_the_next_forecast_reads_it(user, demo_dataset, no_broker):
    program = make_program(user, demo_dataset, model=MODEL)
    calibration.measure(MODEL)
    config = run_config(model=MODEL, epochs=1, batch_size=4)
    first = observed(program, demo_dataset, config)
    assert first["state"] == "ready"
    assert first["measured"]["observed"] == {"prediction": 0}  # the calibration's pace only
    run = runs.launch(user, program, demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    seen = measured.observations(MODEL)
    assert len(seen) == 1 and seen[0].program == program.pk and seen[0].owner == user.pk
    assert seen[0].seconds["prediction"] > 0
    assert seen[0].tokens["prediction"] == pytest.approx(15.0)  # the fake: 10 + 5 a call
    after = observed(program, demo_dataset, config)
    assert after["measured"]["observed"] == {"prediction": 1}
    assert after["calls"] == first["calls"]  # the count is the count
    assert after["tokens"]["expected"] == pytest.approx(15 * after["calls"]["expected"], rel=0.02)
    span = after["seconds"]
    assert span["low"] < span["expected"] < span["high"]
    assert after["time_text"] == after["seconds_range_text"]
    assert any("1 recent run" in note for note in after["assumptions"])


def test_a_run_that_made_no_call_is_not_observed(user, no_broker):
    sizes: dict = {}
    run = Run(pk=10**6, owner_id=user.pk, program_id=None, active_seconds=1.0, forecast={})
    measured.record(run, sizes, None)
    assert measured.OBSERVED_KEY not in sizes


def test_a_model_keeps_its_newest_observations(user, demo_dataset, no_broker):
    program = make_program(user, demo_dataset, model=MODEL)
    calibration.measure(MODEL)
    config = run_config(model=MODEL, epochs=1, batch_size=4)
    run = runs.launch(user, program, demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    run.refresh_from_db()
    sizes = {measured.OBSERVED_KEY: [{"seconds": {}, "tokens": {}}] * measured.KEPT}
    measured.record(run, sizes, None)
    kept = sizes[measured.OBSERVED_KEY]
    assert len(kept) == measured.KEPT and kept[-1]["program"] == program.pk


def test_a_provider_s_calls_are_not_slowed_by_this_machine_s_load(
    user, demo_dataset, no_broker, monkeypatch
):
    program = make_program(user, demo_dataset, model=MODEL)
    calibration.measure(MODEL)
    monkeypatch.setattr(measured, "others_now", lambda: 2.0)  # two busy loops on two cores
    found = observed(program, demo_dataset, run_config(model=MODEL, epochs=1))
    assert not found["local"] and found["measured"]["slowdown"] == {"prediction": 1.0}
