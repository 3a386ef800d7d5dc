"""A local model's time on a machine other processes share (``training.forecasting.contention``)
and a pace kept for an idle machine (``training.forecasting.pace``)."""

from __future__ import annotations

import math

import pytest

from training.forecasting import forecast
from training.forecasting.contention import (
    LOAD_WINDOWS,
    Contention,
    ContentionSpan,
    load_share,
    wanted_threads,
)
from training.forecasting.pace import TIME_SPREAD, CallSize, Pace, fit_pace, run_time

from .test_pace import shape as pace_shape

PACE = Pace(
    call_seconds=0.1,
    prompt_token_seconds=0.002,
    short_token_seconds=0.02,
    long_token_seconds=0.16,
    parallel=2.0,
)
SIZES = {"prediction": CallSize(100, 10), "mutation": CallSize(500, 200)}


def shape(**overrides) -> forecast.RunShape:
    """test_pace's run shape, with OMEGA (its optimizer calls run on one thread)."""
    return pace_shape(**{"optimizer": "OMEGA", **overrides})


def fair_share_used(others: float, threads: float, cores: int) -> float:
    """What the others get when ours compete with them (every runnable thread the same)."""
    return others if others + threads <= cores else others * cores / (others + threads)


def test_the_others_demand_slows_a_runs_threads_by_the_fair_share():
    busy = Contention(others=1.5, cores=2)
    assert busy.slowdown(threads=2) == pytest.approx(1.75)
    assert busy.slowdown(threads=1) == pytest.approx(1.25)
    assert Contention(others=0.5, cores=2).slowdown(threads=1) == 1.0  # a core was free
    assert Contention(others=0.0, cores=2).slowdown(threads=2) == 1.0


@pytest.mark.parametrize("others", [0.4, 1.5, 3.0, 6.0])
@pytest.mark.parametrize("threads", [1.0, 2.0])
def test_what_the_others_got_while_ours_ran_gives_their_demand_back(others, threads):
    used = fair_share_used(others, threads, cores=2)
    found = Contention.from_usage(used, threads, cores=2)
    assert found.others == pytest.approx(others)
    assert found.slowdown(threads) == pytest.approx(Contention(others, 2).slowdown(threads))


def test_the_cpu_a_run_wanted_not_its_threads_inverts_the_fair_share():
    """The bench's OMEGA under load: ours wanted 0.65 threads (its CPU time over its work's
    idle time), the others ~2.4: on 2 cores each runnable thread got 2 / 3.05 of a core."""
    others, wanted, cores = 2.4, 0.65, 2
    part = cores / (others + wanted)
    idle = 20.0
    wall = idle / part
    own_cores = wanted * part
    threads = wanted_threads(own_cores * wall, idle, most=1.5, least=own_cores)
    assert threads == pytest.approx(wanted)
    found = Contention.from_usage(others * part, threads, cores, own_cores=own_cores)
    assert found.others == pytest.approx(others)
    # ours taken to want its 1.5 threads all along: 1.57 cores read as 5.5 threads
    assert Contention.from_usage(others * part, 1.5, cores).others == pytest.approx(5.5, abs=0.1)
    # ours got all it wanted: the others got all they wanted too
    assert Contention.from_usage(1.2, 0.5, cores, own_cores=0.5).others == pytest.approx(1.2)


def test_a_load_average_counts_this_applications_runs_less():
    assert Contention.from_load(4.0, own=1.5, cores=2).others == pytest.approx(2.5)
    assert Contention.from_load(1.0, own=1.5, cores=2).others == 0.0
    # a run of two threads that ended a minute ago still counts in the 1-minute load
    ended = load_share(threads=2, lasted=600, ended_ago=60, window=LOAD_WINDOWS[0])
    assert ended == pytest.approx(2 * math.exp(-1) * (1 - math.exp(-10)))
    assert load_share(threads=2, lasted=600, ended_ago=0, window=60) == pytest.approx(2, rel=1e-4)
    span = ContentionSpan.from_loads((3.0, 1.0, 5.0), (1.0, 0.5, 0.0), cores=2)
    assert (span.low.others, span.expected.others, span.high.others) == (0.5, 2.0, 5.0)


def test_a_loaded_machine_slows_batched_calls_on_all_cores_and_one_call_alone_less():
    counted = forecast.count_calls(shape(), scored=8, best_changes=1)
    idle = run_time(counted, SIZES, PACE, batch_size=4)
    busy = Contention(others=1.5, cores=2)
    loaded = run_time(counted, SIZES, PACE, batch_size=4, contention=busy)
    assert idle.slowdown == {"batched": 1.0, "alone": 1.0}
    assert loaded.slowdown == {"batched": 1.75, "alone": 1.25}
    assert loaded.parts["batched"] == pytest.approx(1.75 * idle.parts["batched"])
    assert loaded.parts["optimizer"] == pytest.approx(1.25 * idle.parts["optimizer"])
    assert loaded.parts["overhead"] == pytest.approx(1.25 * idle.parts["overhead"])
    assert loaded.seconds.expected == pytest.approx(sum(loaded.parts.values()))
    # batch 1: one call at a time, one thread
    single = run_time(counted, SIZES, PACE, batch_size=1, contention=busy)
    assert single.slowdown["batched"] == pytest.approx(1.25)


def test_the_time_range_spans_the_load_the_machine_has_had_lately():
    counted = forecast.count_calls(shape(), scored=8, best_changes=1)
    span = ContentionSpan(Contention(0.0, 2), Contention(1.5, 2), Contention(4.0, 2))
    ranged = run_time(counted, SIZES, PACE, batch_size=4, contention=span)
    at = {
        name: run_time(counted, SIZES, PACE, batch_size=4, contention=c).seconds.expected
        for name, c in (("low", span.low), ("expected", span.expected), ("high", span.high))
    }
    assert ranged.seconds.expected == pytest.approx(at["expected"])
    assert ranged.seconds.low == pytest.approx(at["low"] * (1 - TIME_SPREAD))
    assert ranged.seconds.high == pytest.approx(at["high"] * (1 + TIME_SPREAD))


def test_a_calibration_under_load_gives_the_pace_of_an_idle_machine():
    truth = Pace(0.05, 0.003, 0.04, 0.04, parallel=1.5)
    short, long_prompt, long_answer = CallSize(80, 8), CallSize(380, 8), CallSize(90, 150)
    alone = Contention(others=2.0, cores=2)  # each call alone 1.5x slower
    burst = Contention(others=3.0, cores=2)  # the burst's 1.5 busy threads 2.25x slower
    fitted = fit_pace(
        [(short, 1.5 * truth.call(short))] * 3,
        (long_prompt, 1.5 * truth.call(long_prompt)),
        (long_answer, 1.5 * truth.call(long_answer, long=True)),
        together=(4, 2.25 * 4 * truth.call(short) / 1.5),
        alone=alone,
        burst=burst,
    )
    assert fitted.call(short) == pytest.approx(truth.call(short))
    assert fitted.prompt_token_seconds == pytest.approx(0.003)
    assert fitted.long_token_seconds == pytest.approx(0.04)
    assert fitted.parallel == pytest.approx(1.5)
    assert fitted.idle and fitted.contention == 2.0


def test_a_wild_load_reading_during_the_burst_never_gives_more_calls_at_once_than_cores():
    """The burst's 4 calls took as long as 4 calls one after the other, under a load reading
    far above the machine (8 cores' worth of others on 2 cores): the idle parallel the reading
    implies is capped at the 2 cores the burst ran on."""
    truth = Pace(0.05, 0.003, 0.04, 0.04, parallel=1.0)
    short, long_prompt, long_answer = CallSize(80, 8), CallSize(380, 8), CallSize(90, 150)
    fitted = fit_pace(
        [(short, truth.call(short))] * 3,
        (long_prompt, truth.call(long_prompt)),
        (long_answer, truth.call(long_answer, long=True)),
        together=(4, 4 * truth.call(short)),
        alone=None,
        burst=Contention(others=8.0, cores=2),
    )
    assert fitted.parallel == pytest.approx(2.0)


def test_a_pace_stored_before_loads_were_measured_is_not_taken_for_an_idle_one():
    stored = {k: v for k, v in PACE.to_dict().items() if k not in ("idle", "contention")}
    assert not Pace.from_dict(stored).idle
    assert Pace.from_dict(PACE.to_dict()).idle
