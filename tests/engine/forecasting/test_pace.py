"""Tokens and time of a run's calls at a measured pace (``training.forecasting.pace``)."""

from __future__ import annotations

import json

import pytest

from training.forecasting import forecast
from training.forecasting.pace import (
    LEAST_ANSWER_SHARE,
    RUN_OVERHEAD_SECONDS,
    TIME_FACTOR_BOUNDS,
    TIME_FACTOR_RUNS,
    TIME_SPREAD,
    CallSize,
    Pace,
    fit_pace,
    run_time,
)


def shape(**overrides) -> forecast.RunShape:
    values = {
        "train_inputs": [{"q": f"question {i}"} for i in range(16)],
        "test_size": 4,
        "epochs": 2,
        "batch_size": 4,
        "validation_split": 0.25,
        "optimizer": "RandomFewShot",
    }
    values.update(overrides)
    return forecast.RunShape(**values)


PACE = Pace(
    call_seconds=0.1,
    prompt_token_seconds=0.002,
    short_token_seconds=0.02,
    long_token_seconds=0.16,  # a long structured answer: 8x a short one's tokens
    parallel=2.0,
)
SIZES = {
    "prediction": CallSize(100, 10),
    "judge": CallSize(200, 40),
    "mutation": CallSize(500, 200),
}


def test_omegas_mutations_are_timed_one_at_a_time_by_their_generated_tokens():
    counted = forecast.count_calls(shape(optimizer="OMEGA"))
    result = run_time(counted, SIZES, PACE, batch_size=4)
    mutation = 0.1 + 500 * 0.002 + 200 * 0.16
    assert result.parts["optimizer"] == pytest.approx(counted.optimizer.expected * mutation)
    prediction = 0.1 + 100 * 0.002 + 10 * 0.02
    batched = counted.total.expected - counted.optimizer.expected
    assert result.parts["batched"] == pytest.approx(batched * prediction / 2)  # 2 at once
    assert result.parts["optimizer"] > result.parts["batched"]  # generated tokens dominate
    tokens = batched * 110 + counted.optimizer.expected * 700
    assert result.tokens.expected == pytest.approx(tokens)
    assert result.seconds.expected == pytest.approx(
        result.parts["batched"] + result.parts["optimizer"] + result.parts["overhead"]
    )


def test_the_range_allows_for_the_answers_and_the_pace():
    counted = forecast.count_calls(shape(optimizer="OMEGA"))
    result = run_time(counted, SIZES, PACE, batch_size=4)
    assert result.seconds.low < result.seconds.expected < result.seconds.high
    exact = run_time(
        forecast.count_calls(shape(optimizer="OMEGA"), scored=8, best_changes=1),
        SIZES,
        PACE,
        batch_size=4,
    )
    expected = exact.seconds.expected
    assert exact.seconds.low == pytest.approx(expected * (1 - TIME_SPREAD))
    assert exact.seconds.high == pytest.approx(expected * (1 + TIME_SPREAD))


def test_a_run_sharing_the_cores_gets_its_share_of_the_parallel_calls():
    counted = forecast.count_calls(shape())
    alone = run_time(counted, SIZES, PACE, batch_size=4)
    shared = run_time(counted, SIZES, PACE, batch_size=4, share=0.5)
    assert shared.parts["batched"] == pytest.approx(2 * alone.parts["batched"])
    one_at_a_time = run_time(counted, SIZES, PACE, batch_size=1)
    assert one_at_a_time.parts["batched"] == pytest.approx(2 * alone.parts["batched"])


def test_a_candidates_examples_and_a_shared_prefix_count_where_they_apply():
    counted = forecast.count_calls(shape())
    plain = run_time(counted, SIZES, PACE, batch_size=4)
    longer = run_time(
        counted,
        SIZES,
        PACE,
        batch_size=4,
        prediction_sizes={"seed": CallSize(100, 10), "candidates": CallSize(250, 10)},
    )
    under = counted.candidate_predictions.expected + counted.after_evaluations.expected
    assert under > 0
    assert longer.tokens.expected == pytest.approx(plain.tokens.expected + under * 150)
    fresh = {"prediction": CallSize(100, 10, fresh=20)}
    cheaper = run_time(counted, fresh, PACE, batch_size=4)
    assert cheaper.tokens.expected == pytest.approx(plain.tokens.expected)  # all sent
    assert cheaper.parts["batched"] < plain.parts["batched"]  # fewer evaluated


def test_the_calibration_fit_recovers_the_rates_it_was_measured_at():
    truth = Pace(0.05, 0.003, 0.04, 0.04, parallel=1.0)
    short = CallSize(80, 8)
    long_prompt = CallSize(380, 8)
    long_answer = CallSize(90, 150)
    fitted = fit_pace(
        [(short, truth.call(short)), (short, truth.call(short) + 0.5), (short, truth.call(short))],
        (long_prompt, truth.call(long_prompt)),
        (long_answer, truth.call(long_answer, long=True)),
        together=(4, 2 * truth.call(short)),
        chars_per_token=4.2,
    )
    # the median short call, not the slow one (its short answer is in the call's fixed cost)
    assert fitted.call(short) == pytest.approx(truth.call(short))
    assert fitted.call(long_answer, long=True) == pytest.approx(truth.call(long_answer, long=True))
    assert fitted.prompt_token_seconds == pytest.approx(0.003)
    assert fitted.long_token_seconds == pytest.approx(0.04)
    assert fitted.parallel == pytest.approx(2.0)
    assert fitted.chars_per_token == 4.2


def test_a_short_answer_the_grammar_forces_is_not_priced_at_a_long_answers_rate():
    # Measured like the local model's calibration: the short answer ({"answer": "yes"}) is
    # forced by the grammar but for a token or two, so a short call costs little more than its
    # prompt; a long answer's tokens each take a decode step. The fit must not price the
    # short answer's tokens at the long rate (that made every prediction ~40 % dearer).
    short = CallSize(40, 6)
    fitted = fit_pace(
        [(short, 0.1)] * 3,
        (CallSize(340, 6), 0.4),  # 1 ms a prompt token
        (CallSize(40, 56), 1.1),  # 20 ms a token beyond the short answer
    )
    assert fitted.prompt_token_seconds == pytest.approx(0.001)
    assert fitted.long_token_seconds == pytest.approx(0.02)
    assert fitted.call(short) == pytest.approx(0.1)
    assert fitted.call(CallSize(40, 4)) == pytest.approx(0.1)  # a shorter label: no cheaper
    assert fitted.call(CallSize(40, 56), long=True) == pytest.approx(1.1)


def test_short_calls_slowed_by_a_load_spike_never_make_a_long_answer_free():
    # Under load the short calls took as long as the long answer's call: the difference says
    # its 150 tokens beyond the short answer cost nothing. Each costs at least its share of
    # that call's time.
    short = CallSize(90, 8)
    long_answer = CallSize(90, 158)
    fitted = fit_pace([(short, 3.0)] * 3, (CallSize(390, 8), 3.0), (long_answer, 3.0))
    assert fitted.long_token_seconds == pytest.approx(LEAST_ANSWER_SHARE * 3.0 / 150)
    assert fitted.call(long_answer, long=True) == pytest.approx(3.0 + LEAST_ANSWER_SHARE * 3.0)


def test_a_providers_time_to_first_token_is_not_priced_as_its_long_answer():
    # A provider answers after 1 s (its time to the first token), then 2 ms a token: the long
    # answer's 150 tokens beyond the short one add 0.3 s. The floor under the rate (half the
    # long call over its tokens) priced them at 4.3 ms; it is a local model's, where the load
    # on the short calls can hide the answer's cost.
    short = CallSize(90, 8)
    long_answer = CallSize(90, 158)
    calls = ([(short, 1.0)] * 3, (CallSize(390, 8), 1.0), (long_answer, 1.3))
    provider = fit_pace(*calls, local=False)
    assert provider.long_token_seconds == pytest.approx(0.3 / 150)
    assert provider.call(long_answer, long=True) == pytest.approx(1.3)
    local = fit_pace(*calls)
    assert local.long_token_seconds == pytest.approx(LEAST_ANSWER_SHARE * 1.3 / 150)


def test_recent_runs_teach_the_pace_within_bounds():
    learned = PACE.learned(actual=40.0, predicted=20.0)
    # One run twice as slow as the rule: half the way there (in log space), not all of it.
    assert learned.time_factor == pytest.approx(2**0.5) and learned.runs == 1
    assert learned.time_ratios == (2.0,)
    again = learned.learned(actual=40.0, predicted=20.0).learned(actual=40.0, predicted=20.0)
    assert again.time_factor == pytest.approx(2 ** (7 / 8)) and again.runs == 3
    wild = PACE.learned(actual=1000.0, predicted=1.0)
    assert wild.time_factor == pytest.approx(TIME_FACTOR_BOUNDS[1] ** 0.5)
    assert wild.time_ratios == (TIME_FACTOR_BOUNDS[1],)
    slower = run_time(forecast.count_calls(shape()), SIZES, learned, batch_size=4)
    base = run_time(forecast.count_calls(shape()), SIZES, PACE, batch_size=4)
    assert slower.seconds.expected == pytest.approx(2**0.5 * base.seconds.expected)
    assert base.parts["overhead"] >= RUN_OVERHEAD_SECONDS
    assert Pace.from_dict({**learned.to_dict(), "unknown": 1}) == learned
    stored = json.loads(json.dumps(again.to_dict()))  # as the database gives it back
    assert Pace.from_dict(stored) == again


def test_one_run_at_a_high_load_among_steady_ones_leaves_the_factor_where_they_put_it():
    steady = PACE
    for _ in range(3):
        steady = steady.learned(actual=30.0, predicted=20.0)
    loaded = steady.learned(actual=80.0, predicted=20.0)  # another run shared the cores
    assert loaded.time_ratios == (1.5, 1.5, 1.5, 4.0) and loaded.runs == 4
    assert loaded.time_factor == pytest.approx(1.5 ** (15 / 16))  # the median: 1.5, not 4
    assert steady.time_factor == pytest.approx(1.5 ** (7 / 8))
    recent = loaded
    for _ in range(TIME_FACTOR_RUNS):
        recent = recent.learned(actual=20.0, predicted=20.0)
    assert len(recent.time_ratios) == TIME_FACTOR_RUNS and recent.time_factor == 1.0


def test_a_pace_learnt_before_the_ratios_were_kept_counts_its_factor_as_one_run():
    old = Pace.from_dict({**PACE.to_dict(), "time_factor": 1.5, "runs": 1})
    for name in ("time_ratios", "optimizer_ratios", "optimizer_time_factor", "optimizer_runs"):
        old = Pace.from_dict({k: v for k, v in old.to_dict().items() if k != name})
    learned = old.learned(actual=30.0, predicted=20.0)
    assert learned.time_ratios == (1.5, 1.5) and learned.time_factor == pytest.approx(
        1.5 ** (3 / 4)
    )


def test_an_optimizers_calls_learn_their_own_factor_and_time_only_their_part():
    learned = PACE.learned(
        actual=20.0, predicted=20.0, optimizer_actual=40.0, optimizer_predicted=10.0
    )
    assert learned.time_factor == 1.0 and learned.runs == 1
    # mutations 4x slower than the rule, once: half the way (in log space), batched calls not
    assert learned.optimizer_time_factor == pytest.approx(2.0) and learned.optimizer_runs == 1
    assert PACE.learned(actual=20.0, predicted=20.0).optimizer_runs == 0  # no optimizer call
    omega = forecast.count_calls(shape(optimizer="OMEGA"))
    base = run_time(omega, SIZES, PACE, batch_size=4)
    after = run_time(omega, SIZES, learned, batch_size=4)
    assert base.parts["optimizer"] > 0
    assert after.parts["optimizer"] == pytest.approx(2.0 * base.parts["optimizer"])
    assert after.parts["batched"] == pytest.approx(base.parts["batched"])
    assert after.parts["overhead"] == pytest.approx(base.parts["overhead"])
