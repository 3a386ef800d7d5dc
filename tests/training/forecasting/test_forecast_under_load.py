"""The time forecast of a local model on a machine other processes share: the pace is kept
for an idle machine (a calibration and each run normalised by the contention they met,
``cpu_meter``) and the forecast applies the load there is now. The machine is
a fake (``tests/support/fake_cpu.py``): its load is what the test says, not the real one."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.waiting import until
from tests.training.conftest import make_program, make_run, run_config
from training.execution import attempt as execution
from training.execution import forecast as forecast_services
from training.execution.pace import calibration, cpu_meter, learning
from training.forecasting.contention import LOAD_WINDOWS, load_share
from training.forecasting.pace import TIME_FACTOR_BOUNDS, Pace
from training.models import ModelPace, Run
from training.runs import launch as runs

from .test_forecast import (  # noqa: F401  (fixtures; the autouse one clears calibration requests)
    _no_requests_remembered,
    _the_pace_rule,
    no_broker,
    stored_pace,
)

pytestmark = pytest.mark.django_db(transaction=True)


def local_forecast(user, dataset, **config):
    program = make_program(user, dataset, model="local/smollm2")
    return forecast_services.forecast(
        program, dataset, run_config(model="local/smollm2", **config), measure=False
    )


def test_other_processes_on_the_cores_slow_a_local_models_forecast_by_their_share(
    user, demo_dataset, machine
):
    stored_pace("local/smollm2")
    idle = local_forecast(user, demo_dataset, epochs=1)
    machine.loads = (3.5, 2.0, 1.0)  # other processes want 3.5 threads of the 2 cores
    loaded = local_forecast(user, demo_dataset, epochs=1)
    # batches of 8 keep both cores busy: (3.5 + 2) / 2; the work besides calls one: (3.5 + 1) / 2
    assert loaded["slowdown"] == {"batched": 2.75, "alone": 2.25}
    parts, base = loaded["seconds_parts"], idle["seconds_parts"]
    assert parts["batched"] == pytest.approx(2.75 * base["batched"])
    assert parts["overhead"] == pytest.approx(2.25 * base["overhead"])
    assert loaded["calls"] == idle["calls"] and loaded["tokens"] == idle["tokens"]
    # the range: the least (the 15-minute load) to the most (the 1-minute one)
    assert loaded["seconds"]["high"] > 2 * idle["seconds"]["high"]
    assert loaded["seconds"]["low"] > idle["seconds"]["low"]
    assert any("other processes want ~3.5 of the 2 cores" in n for n in loaded["assumptions"])
    # a provider's calls run elsewhere: no slowdown
    program = make_program(user, demo_dataset, model="fake/rules")
    stored_pace("fake/rules")
    remote = forecast_services.forecast(
        program, demo_dataset, run_config(model="fake/rules", epochs=1), measure=False
    )
    assert remote["slowdown"] == {"batched": 1.0, "alone": 1.0}


def test_a_local_run_that_just_ended_is_not_taken_for_another_process(user, demo_dataset, machine):
    stored_pace("local/smollm2")
    program = make_program(user, demo_dataset, model="local/smollm2")
    make_run(
        user,
        program,
        demo_dataset,
        status=Run.SUCCEEDED,
        active_seconds=300.0,
        finished_at=timezone.now() - timedelta(seconds=30),
        forecast={"local": True, "batch_size": 8},
    )
    machine.loads = (2.0, 2.0, 2.0)  # all of it that run's, fading
    found = local_forecast(user, demo_dataset, epochs=1)["machine"]["contention"]
    own = [load_share(2, 300, 30, window) for window in LOAD_WINDOWS]
    assert found["own"] == [round(v, 2) for v in own]
    assert found["expected"] == pytest.approx(2.0 - own[0], abs=0.02)
    assert found["expected"] < 1.0  # not the 2 threads the load still shows


def test_a_run_measured_under_load_teaches_the_factor_of_an_idle_machine(
    user, demo_dataset, machine
):
    # One run, learnt from twice: once as if the machine was idle, once as if the other
    # processes took 1.5 of its 2 cores while the run's one thread ran (batch 1) all along
    # (its CPU time: the rule's idle time, over twice that wall time): their demand was 3
    # threads, every call 2x slower; the ratio learnt is half.
    model = "fake/rules"
    run, pace = _a_local_run_of(user, demo_dataset, model)
    ratios = []
    for others in (0.0, 1.5):
        ModelPace.objects.filter(model=model).update(pace=pace.to_dict())
        machine.others = others
        if others:  # the idle time the rule says for the run: its ratio on the idle machine
            machine.step = 2 * 30.0 / ratios[0]
        learning.learn_from_run(run.pk, (cpu_meter.sample(), cpu_meter.sample()))
        learned, _ = calibration.current(model)
        ratios.append(learned.time_ratios[-1])
        assert learned.contention == 3.0 * others / 1.5  # the load it met, kept for forecasts
    low, high = TIME_FACTOR_BOUNDS
    assert low < ratios[1] < ratios[0] < high
    assert ratios[1] == pytest.approx(ratios[0] / 2)
    # a run of a few seconds measured a moment of the load: not kept for the next forecasts
    Run.objects.filter(pk=run.pk).update(active_seconds=learning.CONTENTION_MIN_SECONDS - 1)
    ModelPace.objects.filter(model=model).update(pace=pace.to_dict())
    learning.learn_from_run(run.pk, (cpu_meter.sample(), cpu_meter.sample()))
    assert calibration.current(model)[0].contention is None


def _a_local_run_of(user, dataset, model):
    """A run of ``model`` (batch 1: one thread) done, stored as a local one that took 30 s
    (a ratio inside the bounds, long enough to keep its contention), and its model's pace."""
    program = make_program(user, dataset, model=model)
    pace = stored_pace(model, call_seconds=0.2, prompt_token_seconds=0.0, short_token_seconds=0.0)
    run = runs.launch(user, program, dataset, run_config(model=model, epochs=1, batch_size=1))
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    run.refresh_from_db()
    Run.objects.filter(pk=run.pk).update(
        forecast={**run.forecast, "local": True}, active_seconds=30.0
    )
    return run, pace


def _idle_seconds(run, pace, machine):
    """What the rule says ``run``'s work takes on an idle machine (its ratio learnt there:
    30 s over it), the pace put back as it was."""
    machine.others = 0.0
    learning.learn_from_run(run.pk, (cpu_meter.sample(), cpu_meter.sample()))
    idle = 30.0 / calibration.current(pace_model(run))[0].time_ratios[-1]
    ModelPace.objects.filter(model=pace_model(run)).update(pace=pace.to_dict())
    return idle


def pace_model(run):
    return run.forecast["pace_key"]


def test_a_run_that_wanted_less_cpu_than_its_threads_reads_the_others_it_met_not_more(
    user, demo_dataset, machine
):
    """Ours wanted half a thread (its CPU time: half the rule's idle time), the others 3.5
    threads: each runnable thread got half a core, the others 1.75 cores and ours 0.25, over
    twice the idle time. Read as one thread that got a quarter of a core, the 1.75 cores
    were 7 threads (the bench's OMEGA: 1.57 cores read as 5.4 threads, 3.5x slow)."""
    model = "fake/rules"
    run, pace = _a_local_run_of(user, demo_dataset, model)
    idle = _idle_seconds(run, pace, machine)
    machine.others, machine.own, machine.step = 1.75, 0.25, 2 * idle
    learning.learn_from_run(run.pk, (cpu_meter.sample(), cpu_meter.sample()))
    assert calibration.current(model)[0].contention == 3.5


@pytest.fixture
def decodes_here(monkeypatch):
    """The fake model's calls taken for a local model's (no local model is loaded here):
    what a calibration on this machine's CPUs measures."""
    monkeypatch.setattr(calibration, "decodes_here", lambda model, endpoint="": True)


def test_a_calibration_records_the_load_it_met_and_is_kept_for_an_idle_machine(
    machine, decodes_here
):
    machine.others = 1.5  # of 2 cores, while the calls alone (one thread) and the burst ran
    calibration.measure("fake/fewshot?latency=0.01")
    pace, _ = calibration.current("fake/fewshot?latency=0.01")
    assert pace.idle and pace.contention == 3.0  # 1.5 taken with one of ours: 3 threads


def test_a_local_calibration_whose_calls_got_no_cpu_reads_the_fair_share_not_more(
    machine, decodes_here
):
    # Its calls waited on a core slot another run held: ~0 CPU of ours while the others took
    # 1.2 of the 2 cores. Fair share (ours had the rest): 1.5 threads, calls 1.25x slower;
    # inverted with our ~0 CPU it read 24 threads, every call 12.5x slower.
    machine.others, machine.own = 1.2, 0.01
    calibration.measure("fake/fewshot?latency=0.01")
    assert calibration.current("fake/fewshot?latency=0.01")[0].contention == 1.5


def test_a_providers_calibration_under_load_stores_the_pace_it_measured(machine):
    # A remote call uses ~0 CPU here and does not slow down with this machine's load: the
    # pace measured while the others took 1.2 of 2 cores is the idle machine's, not divided
    # by a slowdown (it read 8.5x: 0.204 s a call stored as 0.025 s).
    model = "fake/fewshot?latency=0.2"
    machine.own = 0.01
    calibration.measure(model)
    idle, _ = calibration.current(model)
    machine.others = 1.2
    calibration.measure(model)
    loaded, _ = calibration.current(model)
    assert loaded.contention is None and loaded.idle
    assert loaded.call_seconds == pytest.approx(idle.call_seconds, rel=0.2)
    assert loaded.call_seconds > 0.15  # the 0.2 s latency, not an eighth of it


def test_a_pace_stored_before_loads_were_measured_is_used_and_measured_again(
    user,
    demo_dataset,
    machine,
    no_broker,  # noqa: F811
):
    old = stored_pace("local/smollm2", time_factor=1.6, runs=2, time_ratios=(1.6, 1.6))
    record = {k: v for k, v in old.to_dict().items() if k not in ("idle", "contention")}
    ModelPace.objects.filter(model="local/smollm2").update(pace=record)
    machine.loads = (3.5, 3.5, 3.5)
    program = make_program(user, demo_dataset, model="local/smollm2")
    config = run_config(model="local/smollm2", epochs=1)
    result = forecast_services.forecast(program, demo_dataset, config)
    assert result["state"] == "ready"  # never "measuring" for a model it has a pace of
    assert result["slowdown"] == {"batched": 1.0, "alone": 1.0}  # its load is in its figures
    assert any("measured again" in note for note in result["assumptions"])
    until(lambda: no_broker == [["local/smollm2"]], 5, "a worker asked to measure local/smollm2")
    assert not Pace.from_dict(record).idle


def test_a_pace_an_older_calibration_fitted_is_measured_again_without_its_old_factors(
    user,
    demo_dataset,
    no_broker,  # noqa: F811
):
    # Fitted before the floor under the long-answer rate (0 ms a token under load), with a
    # factor runs taught against that pricing: the forecast asks for it to be measured again,
    # and the new calibration does not carry the old factor over.
    model = "fake/rules"
    stored_pace(model, long_token_seconds=0.0, time_factor=1.6, runs=2, time_ratios=(1.6, 1.6))
    record = {k: v for k, v in calibration.current(model)[0].to_dict().items() if k != "fit"}
    ModelPace.objects.filter(model=model).update(pace=record)
    assert calibration.current(model)[0].outdated
    program = make_program(user, demo_dataset, model=model)
    result = forecast_services.forecast(program, demo_dataset, run_config(model=model))
    assert result["state"] == "ready"
    assert any("an older calibration" in note for note in result["assumptions"])
    until(lambda: no_broker == [[model]], 5, f"a worker asked to measure {model}")
    calibration.measure(model)
    fresh, _ = calibration.current(model)
    assert not fresh.outdated and fresh.time_factor == 1.0 and fresh.runs == 0
    # a pace of this fit keeps what runs taught it
    ModelPace.objects.filter(model=model).update(pace={**fresh.to_dict(), "time_factor": 1.6})
    calibration.measure(model)
    assert calibration.current(model)[0].time_factor == 1.6


def test_the_contention_a_recent_run_measured_is_expected_over_the_load_average(
    user, demo_dataset, machine
):
    # The load average counts what a run does not compete with (processes waiting on disk,
    # ones a lower priority keeps back); what the latest run measured is expected while recent.
    stored_pace("local/smollm2", contention=1.0, contention_at=time.time())
    machine.loads = (3.5, 3.0, 2.0)
    result = local_forecast(user, demo_dataset, epochs=1)
    found = result["machine"]["contention"]
    assert (found["low"], found["expected"], found["high"]) == (1.0, 1.0, 3.5)
    assert result["slowdown"] == {"batched": 1.5, "alone": 1.0}  # (1 + 2) / 2, (1 + 1) / 2
    assert any("~1.0 of the 2 cores as measured lately" in n for n in result["assumptions"])
    stored_pace("local/smollm2", contention=1.0, contention_at=time.time() - 3600)
    later = local_forecast(user, demo_dataset, epochs=1)["machine"]["contention"]
    assert later["expected"] == 3.5  # an hour old: the load average again


def test_the_calibration_sizes_a_judge_from_right_and_wrong_answers_alike():
    import training.engine as synalinks

    with synalinks.usage.track() as usage:
        calibration.measure("fake/rules")
    # a warm-up, 3 short calls, a long prompt, a long answer, the judge's calls, the burst
    judged = len(calibration.JUDGE_SAMPLES)
    assert usage.to_dict()["calls"] == 1 + 3 + 1 + 1 + judged + calibration.BURST
    assert {reference == prediction for reference, prediction in calibration.JUDGE_SAMPLES} == {
        True,
        False,
    }


def test_another_local_run_of_this_application_is_not_counted_again_as_an_other_process(
    user, demo_dataset, machine
):
    # While the run was measured, another local run of this application kept one thread busy
    # (batch 1): the meter saw it among the other processes, and the forecast's share counts
    # it again whenever it still runs. The contention kept is the others' less it.
    model = "fake/rules"
    run, pace = _a_local_run_of(user, demo_dataset, model)
    program = run.program
    machine.step = 2 * _idle_seconds(run, pace, machine)  # the run's thread busy all along
    machine.others = 1.5  # 3 threads' demand against the run's one (as above)
    found = []
    for other_runs in (0, 1):
        if other_runs:
            make_run(
                user,
                program,
                demo_dataset,
                status=Run.RUNNING,
                clock_started_at=timezone.now() - timedelta(seconds=60),
                forecast={"local": True, "batch_size": 1},
            )
        ModelPace.objects.filter(model=model).update(pace=pace.to_dict())
        learning.learn_from_run(run.pk, (cpu_meter.sample(), cpu_meter.sample()))
        found.append(calibration.current(model)[0].contention)
    assert found == [3.0, 2.0]
