"""The measured forecast: every run a worker ends leaves what it observed per call in its
model's row, and the next forecast's tokens and time come from those observations (its
calls as counted); before any run of the model, calls and tokens only, and no time."""

from __future__ import annotations

import pytest

from tests.training.conftest import make_program, run_config
from training.execution import attempt as execution
from training.execution import forecast as forecasts
from training.execution import forecast_text
from training.execution.pace import learning, measured
from training.forecasting.measured import DEFAULT_CHARS_PER_TOKEN, MESSAGE_TOKENS, SPREAD_BY_COUNT
from training.models import LMCallTrace, Run
from training.runs import launch as runs

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "fake/rules?latency=0.03"


@pytest.fixture
def no_broker(monkeypatch):
    monkeypatch.setattr(
        "training.execution.tasks.execute_run.apply_async",
        lambda args, **options: type("R", (), {"id": "t"})(),
    )
    monkeypatch.setattr(measured, "SAMPLE_SECONDS", 0.01)


def executed(user, program, dataset, config) -> Run:
    """A run of ``config`` launched and executed as a worker executes it (``learn_from_run``
    included)."""
    run = runs.launch(user, program, dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    return run


def test_a_model_never_run_has_calls_and_tokens_and_no_time(user, demo_dataset, no_broker):
    program = make_program(user, demo_dataset, model=MODEL)
    first = forecasts.forecast(program, demo_dataset, run_config(model=MODEL, epochs=1))
    assert first["calls"]["expected"] > 0
    assert first["measured"]["observed"] == {"prediction": 0}
    assert first["seconds"] is None and first["time_text"] is None
    sized = first["sizes"]["prediction_seed"]
    seed_calls = first["parts"]["evaluations"]["expected"]
    assert first["tokens"]["expected"] > (sized["prompt"] + sized["completion"]) * seed_calls
    assert (
        f"prompts at {DEFAULT_CHARS_PER_TOKEN:.0f} characters a token (no run of this model "
        "measured them yet)"
    ) in first["assumptions"]
    # it makes no judge's or optimizer's call: nothing is assumed about them
    assert not any(a.startswith(("each judge", "each mutation")) for a in first["assumptions"])
    assert first["summary"] == (
        f"about {first['calls']['expected']} calls, "
        f"{forecast_text.tokens_text(first['tokens']['expected'])}, $0.00, "
        "time known after a first run on this model"
    )


def test_after_a_first_run_the_next_forecast_has_a_time_range(user, demo_dataset, no_broker):
    program = make_program(user, demo_dataset, model=MODEL)
    config = run_config(model=MODEL, epochs=1, batch_size=4)
    first = forecasts.forecast(program, demo_dataset, config)
    run = runs.launch(user, program, demo_dataset, config)
    assert Run.objects.get(pk=run.pk).forecast["seconds"] is None
    # the worker's path: execute, then learn_from_run keeps what the run observed
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    seen = measured.observations(MODEL)
    assert len(seen) == 1 and seen[0].program == program.pk and seen[0].owner == user.pk
    assert seen[0].seconds["prediction"] > 0
    assert seen[0].tokens["prediction"] == pytest.approx(15.0)  # the fake: 10 + 5 a call
    # its predictions' sized prompts kept, to scale it to another optimizer's prompts
    sized = measured.sized(Run.objects.get(pk=run.pk).forecast)["prediction"]
    assert seen[0].sized_chars == {"prediction": pytest.approx(sized * 4.0, rel=0.01)}
    after = forecasts.forecast(program, demo_dataset, config)
    assert after["measured"]["observed"] == {"prediction": 1}
    assert after["calls"] == first["calls"]  # the count is the count
    # the same configuration: its sized prompts are the observed run's, its tokens the fake's
    assert after["tokens"]["expected"] == pytest.approx(15 * after["calls"]["expected"], rel=0.02)
    span = after["seconds"]
    assert span["low"] < span["expected"] < span["high"]
    assert after["time_text"] == after["seconds_range_text"]
    assert "prediction calls as 1 recent run(s) of this model measured them" in after["assumptions"]


def test_a_run_s_traces_teach_the_characters_per_token_of_the_model_s_prompts(
    user, demo_dataset, no_broker
):
    program = make_program(user, demo_dataset, model=MODEL)
    config = run_config(model=MODEL, epochs=1, batch_size=4)
    run = executed(user, program, demo_dataset, config)
    # The fake counts 10 prompt tokens a call, whatever its prompt: here each prediction's
    # tokens are what a model at 2.5 characters a token would count.
    traces = LMCallTrace.objects.filter(run_id=run.pk, role="prediction")
    for trace in traces:
        chars = sum(len(str(m.get("content") or "")) for m in trace.messages)
        traces.filter(pk=trace.pk).update(
            prompt_tokens=round(chars / 2.5) + MESSAGE_TOKENS * len(trace.messages)
        )
    learning.learn_from_run(run.pk)
    learned = measured.stored_sizes(MODEL)[measured.CHARS_KEY]
    assert learned == pytest.approx(2.5, rel=0.01)
    after = forecasts.forecast(program, demo_dataset, config)
    assert not any("characters a token" in note for note in after["assumptions"])


def test_a_role_no_run_observed_is_priced_from_the_observed_ones_with_the_widest_range(
    user, demo_dataset, no_broker
):
    program = make_program(user, demo_dataset, model=MODEL)
    executed(user, program, demo_dataset, run_config(model=MODEL, epochs=1, batch_size=4))
    omega = run_config(
        optimizer="OMEGA", model=MODEL, omega_embedding_model="fake/minilm", epochs=1
    )
    found = forecasts.forecast(program, demo_dataset, omega)
    assert found["parts"]["optimizer"]["expected"] > 0
    assert found["measured"]["observed"] == {"prediction": 1, "mutation": 0}
    note = next(n for n in found["assumptions"] if n.startswith("mutation calls"))
    assert note.startswith("mutation calls (no run of this model made one yet) sized from")
    assert note.endswith("the widest range")
    span = found["seconds"]
    assert span["low"] <= SPREAD_BY_COUNT[0][0] * span["expected"]
    assert span["high"] >= SPREAD_BY_COUNT[0][1] * span["expected"]


def test_a_run_that_made_no_call_is_not_observed(user, no_broker):
    sizes: dict = {}
    run = Run(pk=10**6, owner_id=user.pk, program_id=None, active_seconds=1.0, forecast={})
    measured.record(run, sizes, None)
    assert measured.OBSERVED_KEY not in sizes


def test_a_model_keeps_its_newest_observations(user, demo_dataset, no_broker):
    program = make_program(user, demo_dataset, model=MODEL)
    config = run_config(model=MODEL, epochs=1, batch_size=4)
    run = executed(user, program, demo_dataset, config)
    run.refresh_from_db()
    sizes = {measured.OBSERVED_KEY: [{"seconds": {}, "tokens": {}}] * measured.KEPT}
    measured.record(run, sizes, None)
    kept = sizes[measured.OBSERVED_KEY]
    assert len(kept) == measured.KEPT and kept[-1]["program"] == program.pk


def test_a_provider_s_calls_are_not_slowed_by_this_machine_s_load(
    user, demo_dataset, no_broker, monkeypatch
):
    program = make_program(user, demo_dataset, model=MODEL)
    executed(user, program, demo_dataset, run_config(model=MODEL, epochs=1))
    monkeypatch.setattr(measured, "others_now", lambda: 2.0)  # two busy loops on two cores
    found = forecasts.forecast(program, demo_dataset, run_config(model=MODEL, epochs=1))
    assert not found["local"] and found["measured"]["slowdown"] == {"prediction": 1.0}


def test_calls_the_answers_decide_are_expected_where_this_programs_last_run_took_them(
    user, demo_dataset, no_broker
):
    program = make_program(user, demo_dataset, model=MODEL)
    config = run_config(model=MODEL, epochs=3, batch_size=4)
    counted = forecasts.forecast(program, demo_dataset, config)["calls"]
    assert counted["low"] < counted["high"]  # whether an epoch starts under a new best is open
    omega = run_config(model=MODEL, epochs=3, batch_size=4, optimizer="OMEGA")
    omega_counted = forecasts.forecast(program, demo_dataset, omega)["calls"]
    assert omega_counted["low"] < omega_counted["high"]  # OMEGA's steps leave calls open too
    run = executed(user, program, demo_dataset, config)
    run.refresh_from_db()
    assert counted["low"] <= run.lm_calls <= counted["high"]
    again = forecasts.forecast(program, demo_dataset, config)
    assert again["calls"] == {**counted, "expected": run.lm_calls}
    assert again["parts"]["total"] == again["calls"]
    assert any(
        "1 recent run(s) of this program with RandomFewShot" in a for a in again["assumptions"]
    )
    # another program with no run of its own: where this optimizer's runs of the model went
    other = make_program(user, demo_dataset, model=MODEL, name="Other router")
    borrowed = forecasts.forecast(other, demo_dataset, config)
    assert borrowed["calls"] == {**counted, "expected": run.lm_calls}
    assert any(
        "1 recent run(s) of this model's other programs with RandomFewShot" in a
        for a in borrowed["assumptions"]
    )
    # ... not with other epochs (another range), nor with an optimizer the model never ran
    longer = run_config(model=MODEL, epochs=4, batch_size=4)
    assert not any(
        "took them" in a for a in forecasts.forecast(other, demo_dataset, longer)["assumptions"]
    )
    first = forecasts.forecast(other, demo_dataset, omega)
    assert first["calls"] == omega_counted
    assert not any("took them" in a for a in first["assumptions"])
