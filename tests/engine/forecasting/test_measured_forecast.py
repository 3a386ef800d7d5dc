"""The measured forecast's rule: a run's calls by role at the seconds and tokens per call that
recent runs of the model observed, at the load measured now; a wider range when fewer runs
are known."""

from __future__ import annotations

import pytest

from training.forecasting.decided import (
    KEPT,
    kept,
    optimizer_share,
    recent_share,
    settled,
    share,
)
from training.forecasting.forecast import CallForecast, Span
from training.forecasting.measured import (
    SPREAD_BY_COUNT,
    Observation,
    estimate,
    observe,
    slowdown,
)

THREADS = {"prediction": 2.0, "judge": 2.0, "mutation": 1.0}


def test_the_others_slow_a_run_by_the_fair_share_of_the_cores():
    assert slowdown(0.0, 2.0, 2) == 1.0
    assert slowdown(2.0, 2.0, 2) == 2.0  # two busy loops beside two decode threads
    assert slowdown(2.0, 1.0, 2) == 1.5  # a mutation alone beside them
    assert slowdown(0.5, 1.0, 2) == 1.0  # room left on the cores


def test_an_observation_spreads_the_wall_time_over_the_calls_that_made_it():
    roles = {
        "prediction": {"calls": 40, "latency": 30.0, "tokens": 8000},
        "judge": {"calls": 10, "latency": 30.0, "tokens": 5000},
        "mutation": {"calls": 2, "latency": 20.0, "tokens": 1200},
    }
    found = observe(roles, 60.0, 0.0, THREADS, 2)
    # the mutation's own latency; the batched calls share the other 40 s by their latency
    assert found.seconds["mutation"] == pytest.approx(10.0)
    assert found.seconds["prediction"] == pytest.approx(20.0 / 40)
    assert found.seconds["judge"] == pytest.approx(20.0 / 10)
    assert found.tokens == {"prediction": 200.0, "judge": 500.0, "mutation": 600.0}
    loaded = observe(roles, 120.0, 2.0, THREADS, 2)  # twice the time under twice the demand
    assert loaded.seconds["prediction"] == pytest.approx(
        (120.0 - 20.0) / 2 / 40 / slowdown(2.0, 2.0, 2)
    )
    assert observe({}, 10.0, 0.0, THREADS, 2) is None


def test_the_time_is_the_calls_at_the_observed_pace_and_the_load_now():
    seen = [Observation(seconds={"prediction": 0.5}, tokens={"prediction": 100.0}, program=1)]
    calls = {"prediction": Span.exact(60)}
    quiet = estimate(calls, seen, 0.0, 2, THREADS, program=1)
    assert quiet.seconds.expected == pytest.approx(30.0)
    assert quiet.tokens.expected == pytest.approx(6000.0)
    loaded = estimate(calls, seen, 2.0, 2, THREADS, program=1)
    assert loaded.seconds.expected == pytest.approx(60.0)
    assert loaded.seconds.low < loaded.seconds.expected < loaded.seconds.high


def test_a_program_s_own_runs_are_preferred_and_the_newest_weighs_most():
    seen = [
        Observation(seconds={"prediction": 2.0}, tokens={"prediction": 900.0}, program=2),
        Observation(seconds={"prediction": 0.4}, tokens={"prediction": 100.0}, program=1),
        Observation(seconds={"prediction": 0.6}, tokens={"prediction": 100.0}, program=1),
    ]
    found = estimate({"prediction": Span.exact(10)}, seen, 0.0, 2, THREADS, program=1)
    assert found.observed == {"prediction": 2}
    assert 5.0 < found.seconds.expected < 6.0  # nearer 0.6 a call than 0.4
    other = estimate({"prediction": Span.exact(10)}, seen, 0.0, 2, THREADS, program=3)
    assert other.observed == {"prediction": 3}


def test_the_range_says_less_when_fewer_runs_are_known():
    calls = {"prediction": Span.exact(10)}
    one = [Observation(seconds={"prediction": 0.5}, tokens={"prediction": 100.0}, program=1)]
    first = estimate(calls, one, 0.0, 2, THREADS, program=1)
    known = estimate(calls, one * 4, 0.0, 2, THREADS, program=1)
    assert first.seconds.expected == pytest.approx(known.seconds.expected) == 5.0
    assert first.seconds.high / first.seconds.expected == pytest.approx(
        SPREAD_BY_COUNT[1][1] * slowdown(0.5, 2.0, 2)
    )
    assert (known.seconds.high - known.seconds.low) < (first.seconds.high - first.seconds.low)
    unused = estimate(
        {"prediction": Span.exact(10), "mutation": Span.exact(0)}, one, 0.0, 2, THREADS
    )
    assert "mutation" not in unused.observed  # a role without calls needs no observation


def test_no_observed_call_gives_tokens_from_the_sized_prompts_and_no_time():
    calls = {"prediction": Span(10, 12, 14), "judge": Span.exact(10)}
    found = estimate(calls, [], 0.0, 2, THREADS, sized={"prediction": 100.0, "judge": 300.0})
    assert found.seconds is None
    assert found.tokens == Span(10 * 100 + 3000, 12 * 100 + 3000, 14 * 100 + 3000)
    assert found.observed == {"prediction": 0, "judge": 0}
    assert found.notes == []  # nothing measured to state: the pages say the time comes later


def test_an_unobserved_role_is_priced_at_the_observed_seconds_per_token_widest():
    seen = [Observation(seconds={"prediction": 0.5}, tokens={"prediction": 100.0}, program=1)]
    calls = {"prediction": Span.exact(10), "mutation": Span.exact(4)}
    sized = {"prediction": 100.0, "mutation": 600.0}
    found = estimate(calls, seen, 0.0, 2, THREADS, sized=sized, program=1)
    # a prediction's 0.5 s of wall time is its share of two threads serving the batch: a
    # token keeps a thread busy 0.01 s, and a mutation alone on one thread takes 600 × 0.01
    assert found.seconds.expected == pytest.approx(10 * 0.5 + 4 * 6.0)
    assert found.tokens.expected == pytest.approx(10 * 100 + 4 * 600)
    assert found.observed == {"prediction": 1, "mutation": 0}
    down, up = SPREAD_BY_COUNT[0]
    assert found.seconds.low == pytest.approx(found.seconds.expected * down)
    assert found.seconds.high == pytest.approx(
        (10 * 0.5 * slowdown(0.5, 2.0, 2) + 4 * 6.0 * slowdown(0.5, 1.0, 2)) * up
    )
    assert "mutation calls (no run of this model made one yet)" in found.notes[1]


def test_observed_calls_that_counted_no_token_give_an_unobserved_role_no_time():
    seen = [Observation(seconds={"prediction": 0.5}, tokens={"prediction": 0.0}, program=1)]
    calls = {"prediction": Span.exact(10), "mutation": Span.exact(4)}
    found = estimate(calls, seen, 0.0, 2, THREADS, sized={"mutation": 600.0}, program=1)
    assert found.seconds is None
    assert "counted no tokens to time them by" in found.notes[-1]


def test_the_owner_s_recent_loads_widen_the_range():
    seen = [
        Observation(seconds={"prediction": 0.5}, tokens={}, others=2.0, owner=7, program=1),
        Observation(seconds={"prediction": 0.5}, tokens={}, others=0.0, owner=7, program=1),
    ]
    calls = {"prediction": Span.exact(10)}
    mine = estimate(calls, seen, 0.0, 2, THREADS, program=1, owner=7)
    other = estimate(calls, seen, 0.0, 2, THREADS, program=1, owner=8)
    assert mine.seconds.expected == other.seconds.expected
    assert mine.seconds.high > other.seconds.high


def test_a_program_s_runs_with_the_same_optimizer_come_first():
    seen = [
        Observation(
            {"prediction": 0.5}, {"prediction": 300.0}, program=1, optimizer="RandomFewShot"
        ),
        Observation({"prediction": 0.5}, {"prediction": 100.0}, program=1, optimizer="OMEGA"),
    ]
    calls = {"prediction": Span.exact(10)}
    few_shot = estimate(calls, seen, 0.0, 2, THREADS, program=1, optimizer="RandomFewShot")
    assert few_shot.tokens.expected == pytest.approx(3000.0)
    assert few_shot.observed == {"prediction": 1}
    other = estimate(calls, seen, 0.0, 2, THREADS, program=1, optimizer="NearestFewShot")
    assert other.observed == {"prediction": 2}


def test_another_optimizer_s_tokens_are_scaled_to_this_run_s_prompts_its_own_are_not():
    few_shot = Observation(
        {"prediction": 0.5},
        {"prediction": 150.0},
        program=1,
        optimizer="RandomFewShot",
        sized_chars={"prediction": 600.0},  # 150 sized tokens at 4 characters a token
    )
    calls = {"prediction": Span.exact(10)}

    def tokens(seen: Observation, optimizer: str) -> float:
        # this run's prompts sized at 200 tokens a call, at 4 characters a token
        found = estimate(
            calls,
            [seen],
            0.0,
            2,
            THREADS,
            sized={"prediction": 200.0},
            program=1,
            optimizer=optimizer,
            chars_per_token=4.0,
        )
        return found.tokens.expected

    # OMEGA's candidates carry rewritten instructions: its prompts sized a third longer
    assert tokens(few_shot, "OMEGA") == pytest.approx(10 * 150.0 * 800.0 / 600.0)
    # the same program and optimizer measured these very prompts: taken as measured
    assert tokens(few_shot, "RandomFewShot") == pytest.approx(1500.0)
    # an observation kept without its sizes is taken as measured
    unsized = Observation({"prediction": 0.5}, {"prediction": 150.0}, program=1)
    assert tokens(unsized, "OMEGA") == pytest.approx(1500.0)
    assert Observation.from_dict(few_shot.to_dict()).sized_chars == {"prediction": 600.0}
    kept_before = {"seconds": {"prediction": 0.5}, "tokens": {"prediction": 150.0}}
    assert Observation.from_dict(kept_before).sized_chars == {}


def test_larger_prompts_never_shorten_an_unobserved_role():
    few_shot = Observation(
        {"prediction": 0.5}, {"prediction": 100.0}, program=1, sized_chars={"prediction": 400.0}
    )
    calls = {"prediction": Span.exact(10), "mutation": Span.exact(4)}

    def seconds(prediction_size: float) -> float:
        found = estimate(
            calls,
            [few_shot],
            0.0,
            2,
            THREADS,
            sized={"prediction": prediction_size, "mutation": 600.0},
            program=1,
            optimizer="OMEGA",
            chars_per_token=4.0,
        )
        return found.seconds.expected

    # the mutation is timed at what a token took in the calls that were measured
    assert seconds(200.0) == seconds(100.0) == pytest.approx(10 * 0.5 + 4 * 600 * 0.01)


def test_a_pace_measured_on_another_optimizer_gives_the_widest_range():
    seen = [
        Observation(
            {"prediction": 0.5}, {"prediction": 100.0}, program=1, optimizer="RandomFewShot"
        )
        for _ in range(3)
    ]
    calls = {"prediction": Span.exact(10)}
    own = estimate(calls, seen, 0.0, 2, THREADS, program=1, optimizer="RandomFewShot")
    other = estimate(calls, seen, 0.0, 2, THREADS, program=1, optimizer="OMEGA")
    assert own.seconds.expected == other.seconds.expected == pytest.approx(5.0)
    down, up = SPREAD_BY_COUNT[0]
    assert other.seconds.low == pytest.approx(5.0 * down)
    assert own.seconds.low > other.seconds.low and own.seconds.high < other.seconds.high
    assert other.notes == [
        "prediction calls as 3 recent run(s) of this model with another optimizer or program "
        "(the widest range) measured them"
    ]


def test_a_runs_share_of_its_open_calls_sets_the_next_expectation_and_keeps_the_range():
    assert share(83, Span(69, 112, 141)) == pytest.approx(14 / 72)
    assert share(60, Span(69, 112, 141)) == 0.0 and share(150, Span(69, 112, 141)) == 1.0
    assert share(40, Span.exact(40)) is None  # the configuration decided it
    calls = CallForecast(
        predictions=Span(40, 60, 80),
        optimizer=Span(0, 5, 10),
        judge=Span.exact(0),
        evaluations=Span.exact(20),
        steps=4,
        epochs=2,
        candidates=Span(2, 3, 4),
    )
    found = settled(calls, 0.25)
    assert found.total == Span(60, 72.5, 110)
    assert (found.predictions, found.optimizer, found.evaluations) == (
        Span(40, 50, 80),
        Span(0, 2.5, 10),
        Span.exact(20),
    )
    assert (found.steps, found.epochs) == (4, 2)


def test_each_program_and_optimizer_keeps_its_own_shares_among_the_models_newest():
    entries: list = []
    entries = kept(entries, 1, "RandomFewShot", 0.2, "epochs=3")
    entries = kept(entries, 2, "RandomFewShot", 0.9, "epochs=3")
    entries = kept(entries, 4, "RandomFewShot", 0.0, "epochs=5")
    entries = kept(entries, 1, "OMEGA", 0.7, "epochs=3")
    entries = kept(entries, 1, "RandomFewShot", 0.4, "epochs=3")
    value, runs = recent_share(entries, 1, "RandomFewShot")
    assert runs == 2 and value == pytest.approx((0.4 + 0.5 * 0.2) / 1.5)  # the newest weighs most
    assert recent_share(entries, 3, "RandomFewShot") == (None, 0)
    # a program never run with RandomFewShot: where its runs of every program of its shape went
    value, runs = optimizer_share(entries, "RandomFewShot", "epochs=3")
    assert runs == 3 and value == pytest.approx((0.4 + 0.5 * 0.9 + 0.25 * 0.2) / 1.75)
    assert optimizer_share(entries, "RandomFewShot", "epochs=5") == (0.0, 1)
    assert optimizer_share(entries, "RandomFewShot", "epochs=2") == (None, 0)
    assert optimizer_share(entries, "NearestFewShot", "epochs=3") == (None, 0)
    for _ in range(KEPT):
        entries = kept(entries, 2, "OMEGA", 0.5)
    assert len(entries) == KEPT and recent_share(entries, 1, "RandomFewShot") == (None, 0)
