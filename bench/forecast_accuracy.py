"""Forecast accuracy: the launch form's forecast against what real runs did, on the local model.

On the demo (``bootstrap_demo``: its dataset and program on ``local/smollm2``), three runs a
new user launches, each forecast as the launch form forecasts it, then executed by the
worker's own code (``execution.execute``, in this process: a private SQLite database in a
temp var/ dir, an in-memory channel layer), one after another on this machine under whatever
load it has (the 1-minute load average is printed with each run):

1. ``RandomFewShot``: the demo's launch form unchanged (3 epochs, batch 8);
2. ``OMEGA``: one epoch in batches of 16 (two mutations on ``local/smollm2``);
3. ``LMAsJudge``: RandomFewShot for one epoch on the first 12 training and 4 test rows of the
   demo, rewarded by ``local/smollm2`` as a judge.

Before the first forecast the model is calibrated as a worker does it the first time a form
needs it (``calibration.measure``); after each run the worker's ``learn_from_run`` updates the
pace, as in production. With caps (the default) the OMEGA and LMAsJudge configurations run
once more with caps at ``--cap-share`` of their forecast (calls and minutes): each cap against
what the run used (``Run.lm_calls``, ``Run.active_seconds``); overshoot is how far past its
cap a run went.

Baseline in the same run: ``--before REV`` (default ``main``) forecasts the same three
configurations with that revision's code (its trial of a few predictions on a worker and its
estimate), in a child process on a worktree of it, against the same database, before the
first run.

Error of one run: |forecast − actual| / actual; the last line gives the most over the runs.
Aim: calls within 15 %, tokens within 25 %, time within 35 %, overshoot 0.

    nice .venv/bin/python bench/forecast_accuracy.py [--no-caps] [--cap-share 0.4] \
        [--before REV | --no-before]

Last line: ``forecast: calls E1 %, tokens E2 %, time E3 %; caps overshoot O (max over runs)``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

CODE_ROOT = Path(os.environ.get("FORECAST_BENCH_CODE_ROOT") or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(CODE_ROOT))
sys.path.insert(1, str(Path(__file__).resolve().parent))

MODEL = "local/smollm2"
#: The three runs (the launch form's fields the demo form would post, past its defaults),
#: sized for a loaded 2-core machine: the demo form unchanged; OMEGA for one epoch in batches
#: of 16 (two mutations); an LM judge on the first 12 training and 4 test rows of the demo.
RUNS = {
    "RandomFewShot": {"optimizer": "RandomFewShot", "epochs": 3},
    "OMEGA": {"optimizer": "OMEGA", "epochs": 1, "batch_size": 16},
    "LMAsJudge": {
        "optimizer": "RandomFewShot",
        "epochs": 1,
        "reward": "LMAsJudge",
        "reward_language_model": MODEL,
    },
}
#: Rows (train, test) of the demo a run trains on (None: all of it).
SUBSETS = {"LMAsJudge": (12, 4)}
#: The runs run again with caps (the issue's: a calls cap on OMEGA, a minutes cap on a judge).
CAPPED = ("OMEGA", "LMAsJudge")


def setup(var_dir: str, migrate: bool = True) -> None:
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        TRAINBOARD_VAR_DIR=var_dir,
        TRAINBOARD_SAMPLE_PREDICTIONS="2",
    )
    import django
    from django.conf import settings

    django.setup()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)  # a line per call otherwise
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
    # As a worker does at start (project/celery.py): runs find the local models loaded.
    from trainboard_local import preload

    preload.start_preload([settings.TRAINBOARD_LM, settings.TRAINBOARD_EMBEDDING_MODEL])
    preload.wait(timeout=300)


def subset(user, demo, train: int, test: int):
    """A dataset of the first ``train`` / ``test`` rows of the demo dataset."""
    from datasets.models import Dataset, DatasetRow

    dataset = Dataset.objects.create(
        owner=user,
        name=f"demo {train}/{test}",
        original_name="demo.jsonl",
        format="jsonl",
        input_fields=demo.input_fields,
        target_fields=demo.target_fields,
        row_count=train + test,
        train_count=train,
        test_count=test,
    )
    rows = list(demo.rows.filter(split="train").order_by("index")[:train]) + list(
        demo.rows.filter(split="test").order_by("index")[:test]
    )
    for index, row in enumerate(rows):
        DatasetRow.objects.create(dataset=dataset, index=index, split=row.split, data=row.data)
    return dataset


def program_on(user, demo_program, name: str):
    """The demo program, or a copy of it on the run's subset of the demo."""
    if name not in SUBSETS:
        return demo_program
    dataset = subset(user, demo_program.dataset, *SUBSETS[name])
    copy = type(demo_program).objects.get(pk=demo_program.pk)
    copy.pk = None
    copy.name = f"{demo_program.name} ({dataset.name})"
    copy.dataset = dataset
    copy.save()
    return copy


def config_for(program, name: str, caps: dict | None = None) -> dict:
    from training.execution.run_config import TRAINING_DEFAULTS, validate_run_config

    targets = program.dataset.target_names
    data = {
        "reward": "ExactMatch",
        **{k: v for k, v in TRAINING_DEFAULTS.items() if k != "shuffle"},
        "seed": 1,
        **RUNS[name],
        **(caps or {}),
    }
    return validate_run_config(data, targets, targets, MODEL)


def baseline_child(spec: dict) -> None:
    """``--run``: the old revision's forecast of each configuration (its trial, then its
    estimate), printed as the last JSON line."""
    setup(spec["var_dir"], migrate=False)
    from training.execution import forecast as old
    from training.models import Program

    found = {}
    for name, config in spec["configs"].items():
        program = Program.objects.get(pk=spec["programs"][name])
        mutation_model = old.optimizer_model(config)
        key = old.trial_key(program, program.dataset, mutation_model)
        state = old._remember(key, old.run_trial(program, program.dataset, mutation_model))
        if state["state"] != "ready":
            found[name] = {"error": state.get("message")}
            continue
        found[name] = old.forecast(program, program.dataset, config, measure=False)
    print(json.dumps(found, default=str))


def baseline(revision: str, var_dir: str, programs: dict, configs: dict) -> dict:
    import revisions

    tree = revisions.worktree(revision, "forecast-before-")
    spec = {
        "var_dir": var_dir,
        "programs": {name: program.pk for name, program in programs.items()},
        "configs": configs,
    }
    return revisions.finish(revisions.start(__file__, spec, tree, "FORECAST_BENCH_CODE_ROOT"))


def execute(user, program, config: dict) -> dict:
    from training.execution import attempt as execution
    from training.execution import forecast as forecast_services
    from training.models import Run

    predicted = forecast_services.at_launch(program, program.dataset, config)
    if not predicted or predicted["state"] != "ready":
        raise SystemExit(f"no measured forecast: {predicted}")
    run = Run.objects.create(
        owner=user, program=program, dataset=program.dataset, config=config, forecast=predicted
    )
    import forecast_parts
    from django.db.models import Sum

    from training.execution.pace import cpu_meter
    from training.execution.pace.learning import OPTIMIZER_ROLES

    load = os.getloadavg()
    cpu_started = cpu_meter.sample()
    meter = forecast_parts.Parts()
    meter.start()
    started = time.perf_counter()
    try:
        status = execution.execute(run.pk, run.attempt, worker="bench")
    finally:
        parts = meter.stop()
    wall = time.perf_counter() - started
    others = cpu_meter.others_cores(cpu_started, cpu_meter.sample())
    run.refresh_from_db()
    optimizer = run.call_traces.filter(role__in=OPTIMIZER_ROLES, kind="completion").aggregate(
        s=Sum("latency")
    )["s"]
    if status not in (Run.SUCCEEDED, Run.STOPPED):
        raise SystemExit(f"run {run.pk} ended {status}: {run.error}")
    usage = run.usage or {}
    return {
        "forecast": predicted,
        "status": status,
        "calls": run.lm_calls,
        "tokens": int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0),
        "seconds": wall,
        "minutes": run.active_seconds / 60.0,
        "after": run.evaluations.filter(phase="after").exists(),
        "load": load[0],
        "loads": (load, os.getloadavg()),
        "others": others,
        "optimizer_seconds": float(optimizer or 0.0),
        "parts": parts,
    }


def phases(forecast: dict, result: dict) -> str:
    """The time by part, forecast against actual (an optimizer's calls: their traced
    latency; the rest: the wall time less it), and the load the run met."""
    parts = forecast.get("seconds_parts") or {}
    slowdown = forecast.get("slowdown") or {}
    rest = parts.get("batched", 0.0) + parts.get("overhead", 0.0)
    start, end = result["loads"]
    others = result["others"]
    return (
        f"time by part: batched+overhead {rest:.0f} s forecast / "
        f"{result['seconds'] - result['optimizer_seconds']:.0f} s actual, optimizer "
        f"{parts.get('optimizer', 0.0):.0f} / {result['optimizer_seconds']:.0f} s; slowdown "
        f"assumed {slowdown.get('batched', 1.0):.2f}x batched, {slowdown.get('alone', 1.0):.2f}x "
        f"alone; load {'/'.join(f'{v:.1f}' for v in start)} at start, "
        f"{'/'.join(f'{v:.1f}' for v in end)} at end; other processes took "
        + ("?" if others is None else f"{others:.2f}")
        + " cores meanwhile"
    )


def error(forecast: float, actual: float) -> float:
    return 100.0 * abs(forecast - actual) / actual if actual else 0.0


def figures(forecast: dict, result: dict) -> tuple[float, float, float]:
    return (
        error(forecast["calls"]["expected"], result["calls"]),
        error(forecast["tokens"]["expected"], result["tokens"]),
        error(forecast["seconds"]["expected"], result["seconds"]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help=argparse.SUPPRESS)  # the baseline's child process
    parser.add_argument("--no-caps", action="store_true", help="skip the capped runs")
    parser.add_argument(
        "--cap-share", type=float, default=0.4, help="caps: this share of the forecast"
    )
    parser.add_argument("--before", default="main", help="the baseline's git revision")
    parser.add_argument("--no-before", action="store_true", help="no baseline forecast")
    args = parser.parse_args()
    import forecast_parts  # noqa: F401  (bench/ is on the path)

    if args.run:
        baseline_child(json.loads(args.run))
        return
    var_dir = tempfile.mkdtemp(prefix="tb-forecast-bench-")
    bench_started = time.perf_counter()
    setup(var_dir)
    from django.contrib.auth import get_user_model

    from training.execution.pace import calibration
    from training.programs.demo import ensure_demo_program

    user, _ = get_user_model().objects.get_or_create(username="bench")
    demo = ensure_demo_program(user, MODEL)
    programs = {name: program_on(user, demo, name) for name in RUNS}
    configs = {name: config_for(programs[name], name) for name in RUNS}
    before = {}
    if not args.no_before:
        started = time.perf_counter()
        before = baseline(args.before, var_dir, programs, configs)
        print(f"baseline ({args.before}) forecasts made in {time.perf_counter() - started:.0f} s")
    started = time.perf_counter()
    pace = calibration.measure(MODEL)  # as the worker's task does, the first time
    print(
        f"calibration: {time.perf_counter() - started:.1f} s (load {os.getloadavg()[0]:.1f}, "
        f"other processes' demand {pace.contention} threads): "
        f"{pace.call_seconds:.3f} s a call + {pace.prompt_token_seconds * 1000:.2f} ms a prompt "
        f"token + {pace.short_token_seconds * 1000:.1f} / {pace.long_token_seconds * 1000:.1f} ms "
        f"a short / long answer's token, {pace.parallel:.2f} calls at once, "
        f"{pace.chars_per_token:.2f} chars a token"
    )
    header = (
        f"{'run':<14}{'load':>5}  {'calls: before / after / actual':<31}"
        f"{'tokens: before / after / actual':<36}{'seconds: before / after (range) / actual'}"
    )
    print(header)
    errors: dict[str, list[float]] = {"calls": [], "tokens": [], "time": []}
    old_errors: dict[str, list[float]] = {"calls": [], "tokens": [], "time": []}
    overshoot = {"calls": 0.0, "minutes": 0.0}
    capped = 0
    for name in RUNS:
        program = programs[name]
        result = execute(user, program, configs[name])
        new = result["forecast"]
        for key, value in zip(errors, figures(new, result), strict=True):
            errors[key].append(value)
        old = before.get(name) or {}
        if "seconds" in old:
            for key, value in zip(old_errors, figures(old, result), strict=True):
                old_errors[key].append(value)

        def three(part: str, old: dict = old, new: dict = new, result: dict = result) -> str:
            was = old.get(part, {}).get("expected", "—") if old else "—"
            shown = f"{was:.0f}" if isinstance(was, float) else str(was)
            now = new[part]["expected"]
            return f"{shown} / {now:.0f} / {result[part if part != 'calls' else 'calls']:.0f}"

        span = new["seconds"]
        print(
            f"{name:<14}{result['load']:>5.1f}  {three('calls'):<31}{three('tokens'):<36}"
            f"{three('seconds')} s (after {span['low']:.0f}–{span['high']:.0f} s)"
            f"   errors after: calls {errors['calls'][-1]:.0f} %, tokens "
            f"{errors['tokens'][-1]:.0f} %, time {errors['time'][-1]:.0f} %",
            flush=True,
        )
        print(f"{'':<21}assumes: {'; '.join(new['assumptions'])}", flush=True)
        print(f"{'':<21}{phases(new, result)}", flush=True)
        for line in forecast_parts.lines(result["parts"], new):
            print(f"{'':<21}{line}", flush=True)
        if args.no_caps or name not in CAPPED:
            continue
        caps = {
            "budget_calls": max(1, int(new["calls"]["expected"] * args.cap_share)),
            "budget_minutes": max(0.1, round(span["expected"] * args.cap_share / 60, 1)),
        }
        run = execute(user, program, config_for(program, name, caps))
        capped += 1
        over_calls = max(0, run["calls"] - caps["budget_calls"])
        over_minutes = max(0.0, run["minutes"] - caps["budget_minutes"])
        overshoot["calls"] = max(overshoot["calls"], over_calls)
        overshoot["minutes"] = max(overshoot["minutes"], over_minutes)
        print(
            f"{name:<14}{run['load']:>5.1f}  caps {caps['budget_calls']} calls, "
            f"{caps['budget_minutes']:.1f} min: used {run['calls']} calls, "
            f"{run['minutes']:.2f} min ({run['status']}, after-evaluation "
            f"{'stored' if run['after'] else 'skipped'})",
            flush=True,
        )
    final, _ = calibration.current(MODEL)
    print(
        f"pace after the runs (for an idle machine): time factor {final.time_factor:.2f} over {final.runs} runs "
        f"(ratios {', '.join(f'{r:.2f}' for r in final.time_ratios)}), optimizer "
        f"{final.optimizer_time_factor:.2f} over {final.optimizer_runs}; "
        f"bench {time.perf_counter() - bench_started:.0f} s, load now {os.getloadavg()[0]:.1f}"
    )
    if old_errors["time"]:
        print(
            f"before ({args.before}): calls {max(old_errors['calls']):.1f} %, tokens "
            f"{max(old_errors['tokens']):.1f} %, time {max(old_errors['time']):.1f} % (max over "
            f"runs; mean {sum(old_errors['time']) / len(old_errors['time']):.1f} % on time)"
        )
    shown = (
        f"{overshoot['calls']:.0f} calls, {overshoot['minutes'] * 60:.1f} s" if capped else "n/a"
    )
    print(
        f"forecast: calls {max(errors['calls']):.1f} %, tokens {max(errors['tokens']):.1f} %, "
        f"time {max(errors['time']):.1f} %; caps overshoot {shown} (max over runs)"
    )


if __name__ == "__main__":
    main()
