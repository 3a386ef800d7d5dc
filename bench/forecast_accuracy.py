"""Forecast accuracy: the launch form's forecast against what real runs did, on the local model.

On the demo (``bootstrap_demo``: its dataset and program on ``local/smollm2``), the runs of
:data:`RUNS`, each forecast as the launch form forecasts it (``execution.forecast.forecast``,
carried to the launch by ``forecast_shown`` and stored as ``Run.forecast``), then executed by
the worker's own code (``execution.execute``, in this process: a private SQLite database in a
temp var/ dir, an in-memory channel layer), one after another, in two conditions in the same
invocation:

1. **quiet**: the machine as it is (nothing else should run);
2. **loaded**: :data:`HOGS` CPU-bound processes of the bench's own beside it (started
   :data:`HOG_WARMUP` seconds before the first forecast, stopped when the last run ends).

Before the counted runs of the quiet condition, a newcomer's first run: the home page's
Quick try of the demo, launched and executed once, not counted (its forecast has calls and
tokens and no time: no run of the model was measured yet; the bench prints what it said).
The local model's answers are cached in the bench's own directory, so no run replays an
earlier invocation's answers (a counted run still finds the answers an earlier run of the
same invocation gave to the same prompts, as a user's second run does). Every run ends
with the worker's ``learn_from_run``, as in production, so each counted forecast knows the
runs before it.

Form = page: the form's forecast fragment (``run_forecast_form.html``, rendered from the
form's answer) and the run page's forecast section (``run_forecast.html``, rendered from the
stored ``Run.forecast``) must show the same calls and the same time range.

Errors of one run: |forecast − actual| / actual (calls, tokens, time at its expected value);
inside: the actual time within the forecast's range. The last line: calls and tokens the most
over the runs, time inside its range for I of N runs (both conditions), the median time error,
and the runs whose form and page agree. Done when I = N, median time ≤ 35 %, tokens ≤ 25 %,
calls exact, P = N.

Another forecast measured against the stored one in the same runs: ``--also MODULE:FUNC``
(``FUNC(program, dataset, config)`` → a forecast dict with ``calls``, ``tokens`` and
``seconds``, each ``low``/``expected``/``high``), made just before each launch.

    .venv/bin/python bench/forecast_accuracy.py [--only quiet|loaded] [--also MODULE:FUNC]

Last line: ``forecast: calls C %, tokens T %, time inside range I of N runs, median time error
E %; form = page P of N``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from html import unescape
from pathlib import Path

CODE_ROOT = Path(os.environ.get("FORECAST_BENCH_CODE_ROOT") or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(CODE_ROOT))
sys.path.insert(1, str(Path(__file__).resolve().parent))

MODEL = "local/smollm2"
#: The runs of each condition (the launch form's fields past its defaults), small enough for
#: the whole bench to take about a quarter of an hour on a 2-core machine: the demo's form
#: unchanged (RandomFewShot: its candidates' prompts carry examples), OMEGA for three epochs
#: (a mutation a batch, one at a time), an LM judge (long answers) for one epoch.
RUNS = {
    "RandomFewShot": {"optimizer": "RandomFewShot", "epochs": 3},
    "OMEGA": {"optimizer": "OMEGA", "epochs": 3},
    "LMAsJudge": {
        "optimizer": "RandomFewShot",
        "epochs": 1,
        "reward": "LMAsJudge",
        "reward_language_model": MODEL,
    },
}
#: The newcomer's first run, before the counted ones: the home page's Quick try of the demo
#: (the launch form's ``quick`` preset).
FIRST_RUN = "Quick try"
#: Rows (train, test) of the demo a run trains on (absent: all of it).
SUBSETS: dict[str, tuple[int, int]] = {}
#: The loaded condition: this many CPU-bound processes, started this long before its first
#: forecast (the load averages a form reads then see them).
HOGS = 2
HOG_WARMUP = 45.0
CONDITIONS = ("quiet", "loaded")


def setup(var_dir: str) -> None:
    """Django on a private SQLite database under ``var_dir``, beside the embedded Redis that
    ``main`` started there (as ``make run`` does: a run's liveness pulse and the worker beats
    live in it)."""
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        TRAINBOARD_VAR_DIR=var_dir,
        TRAINBOARD_SAMPLE_PREDICTIONS="2",
        # a cache of its own: no answer replayed from an earlier invocation's runs
        TRAINBOARD_LM_CACHE_DIR=str(Path(var_dir) / "lm-cache"),
    )
    import django
    from django.conf import settings

    django.setup()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)  # a line per call otherwise
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


def config_for(program, name: str) -> dict:
    from training.execution.run_config import TRAINING_DEFAULTS, presets, validate_run_config

    targets = program.dataset.target_names
    fields = RUNS.get(name) or presets(label_task=True)["quick"]["values"]  # the demo's
    data = {
        "reward": "ExactMatch",
        **{k: v for k, v in TRAINING_DEFAULTS.items() if k != "shuffle"},
        "seed": 1,
        **fields,
    }
    return validate_run_config(data, targets, targets, MODEL)


# -- the form and the page ----------------------------------------------------------------------


def _text(html: str, pattern: str) -> str:
    found = re.search(pattern, html, re.S)
    return " ".join(unescape(re.sub(r"<[^>]+>", "", found.group(1))).split()) if found else ""


def form_shows(forecast: dict) -> dict[str, str]:
    """What the launch form's forecast fragment shows: its calls and time (the range)."""
    from django.template.loader import render_to_string

    html = render_to_string(
        "training/partials/run_forecast_form.html", {"forecast": forecast, "revision": "1"}
    )
    time_text = _text(html, r'id="forecast-time"[^>]*>(.*?)</dd>')
    found = re.search(r"\(([^()]*)\)\s*$", time_text)
    return {
        "calls": " ".join(re.findall(r"\d+", _text(html, r'id="forecast-calls">(.*?)</dd>'))),
        "time": found.group(1) if found else time_text,
    }


def page_shows(run) -> dict[str, str]:
    """What the run page's forecast section shows of its stored forecast: calls, time."""
    from django.template.loader import render_to_string

    html = render_to_string("training/partials/run_forecast.html", {"run": run})

    def cell(label: str) -> str:
        return _text(html, rf'<tr data-row="{label}">.*?<td>(.*?)</td>')

    return {"calls": " ".join(re.findall(r"\d+", cell("LM calls"))), "time": cell("Time")}


# -- one run ----------------------------------------------------------------------------------


def launch(user, program, config: dict, also) -> tuple:
    """The form's forecast, the run launched with it as the launch view does
    (``forecast_shown``), and the other forecast (``--also``) made at the same moment."""
    from training.execution import forecast as forecast_services
    from training.execution import forecast_shown
    from training.models import Run

    dataset = program.dataset
    shown = forecast_services.forecast(program, dataset, config)  # the form's view
    other = also(program, dataset, config) if also else None
    carried = forecast_shown.carry(program, None, dataset, config, shown)
    stored = forecast_shown.carried(carried, program, None, dataset, config)
    run = Run.objects.create(
        owner=user,
        program=program,
        dataset=dataset,
        config=config,
        forecast=stored or forecast_services.at_launch(program, dataset, config),
    )
    return run, shown, other


def execute(run) -> dict:
    import forecast_parts

    from training.execution import attempt as execution
    from training.execution.pace import cpu_meter
    from training.models import Run

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
    if status != Run.SUCCEEDED:
        raise SystemExit(f"run {run.pk} ended {status}: {run.error}")
    usage = run.usage or {}
    return {
        "calls": run.lm_calls,
        "tokens": int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0),
        "seconds": wall,
        "active": run.active_seconds,
        "loads": (load, os.getloadavg()),
        "others": others,
        "parts": parts,
    }


def first_run(user, program, config: dict) -> None:
    """The newcomer's first run (not counted): its forecast, what it said, and the run that
    gives the model its first observations."""
    run, shown, _ = launch(user, program, config, None)
    tokens = shown["tokens"]
    time_said = shown.get("time_text") or "no time (known after a first run on this model)"
    print(
        f"first run (not counted): forecast calls {shown['calls']['expected']}, tokens "
        f"{tokens['expected']} ({tokens['low']}–{tokens['high']}), {time_said}; "
        f"form {form_shows(shown)} / page {page_shows(run)}",
        flush=True,
    )
    result = execute(run)
    print(
        f"first run: {result['calls']} calls, {result['tokens']} tokens "
        f"({error(tokens['expected'], result['tokens']):.0f} %), {result['seconds']:.0f} s",
        flush=True,
    )


def error(forecast: float, actual: float) -> float:
    return 100.0 * abs(forecast - actual) / actual if actual else 0.0


def judged(forecast: dict, result: dict) -> dict:
    """One forecast against one run: its errors and whether the time fell in its range."""
    span = forecast["seconds"]
    return {
        "calls": error(forecast["calls"]["expected"], result["calls"]),
        "calls_exact": forecast["calls"]["low"] <= result["calls"] <= forecast["calls"]["high"],
        "tokens": error(forecast["tokens"]["expected"], result["tokens"]),
        "time": error(span["expected"], result["seconds"]),
        "inside": span["low"] <= result["seconds"] <= span["high"],
    }


def run_line(label: str, forecast: dict, result: dict, verdict: dict) -> str:
    span, calls = forecast["seconds"], forecast["calls"]
    # a call's tokens apart from how many calls there were
    each = forecast["tokens"]["expected"] / max(1, calls["expected"])
    actual_each = result["tokens"] / max(1, result["calls"])
    return (
        f"  {label:<8} calls {calls['expected']} ({calls['low']}–{calls['high']}) / "
        f"{result['calls']}; tokens {forecast['tokens']['expected']:.0f} / {result['tokens']} "
        f"({verdict['tokens']:.0f} %; a call {each:.0f} / {actual_each:.0f}, "
        f"{error(each, actual_each):.0f} %); time {span['expected']:.0f} s ({span['low']:.0f}–"
        f"{span['high']:.0f}) / {result['seconds']:.0f} s ({verdict['time']:.0f} %), "
        f"{'inside' if verdict['inside'] else 'OUTSIDE'}"
    )


def last_line(verdicts: list[dict], agree: int | None) -> str:
    n = len(verdicts)
    inside = sum(v["inside"] for v in verdicts)
    median = statistics.median(v["time"] for v in verdicts) if verdicts else 0.0
    form = f"; form = page {agree} of {n}" if agree is not None else ""
    return (
        f"forecast: calls {max(v['calls'] for v in verdicts):.1f} %, tokens "
        f"{max(v['tokens'] for v in verdicts):.1f} %, time inside range {inside} of {n} runs, "
        f"median time error {median:.1f} %{form}"
    )


# -- the load ---------------------------------------------------------------------------------


def start_hogs() -> list[subprocess.Popen]:
    return [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(HOGS)
    ]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        hog.terminate()
    for hog in hogs:
        try:
            hog.wait(timeout=10)
        except subprocess.TimeoutExpired:
            hog.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=CONDITIONS, help="one condition only")
    parser.add_argument("--also", help="MODULE:FUNC, another forecast measured beside")
    args = parser.parse_args()
    var_dir = tempfile.mkdtemp(prefix="tb-forecast-bench-")
    bench_started = time.perf_counter()
    from core.local_runtime import embedded_redis

    socket = Path(var_dir) / "redis.sock"
    redis = embedded_redis.start(socket, log_path=Path(var_dir) / "redis.log")
    try:
        setup(var_dir)
        measure(args, bench_started)
    finally:
        embedded_redis.stop(redis, socket)


def measure(args: argparse.Namespace, bench_started: float) -> None:
    """The first run, then each condition's runs, then the last line."""
    import forecast_parts  # bench/ is on the path
    from django.contrib.auth import get_user_model

    from training.programs.demo import ensure_demo_program

    also = None
    if args.also:
        module, _, name = args.also.partition(":")
        also = getattr(importlib.import_module(module), name)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    demo = ensure_demo_program(user, MODEL)
    programs = {name: program_on(user, demo, name) for name in RUNS}
    configs = {name: config_for(programs[name], name) for name in RUNS}
    first_run(user, demo, config_for(demo, FIRST_RUN))
    verdicts: list[dict] = []
    others: list[dict] = []
    agree = 0
    for condition in (args.only,) if args.only else CONDITIONS:
        hogs: list[subprocess.Popen] = []
        if condition == "loaded":
            hogs = start_hogs()
            time.sleep(HOG_WARMUP)
        try:
            for name in RUNS:
                run, shown, other = launch(user, programs[name], configs[name], also)
                if not shown.get("seconds"):
                    raise SystemExit(f"{name}: no time forecast after the first run")
                result = execute(run)
                stored = run.forecast
                same = form_shows(shown) == page_shows(run)
                agree += same
                verdict = judged(stored, result)
                verdicts.append(verdict)
                start, end = result["loads"]
                print(
                    f"{condition:<7}{name:<14} load {'/'.join(f'{v:.1f}' for v in start)} → "
                    f"{'/'.join(f'{v:.1f}' for v in end)}, others took "
                    + ("?" if result["others"] is None else f"{result['others']:.2f}")
                    + f" cores; form {form_shows(shown)} / page {page_shows(run)}: "
                    f"{'same' if same else 'DIFFERENT'}",
                    flush=True,
                )
                print(run_line("stored", stored, result, verdict), flush=True)
                if other is not None:
                    second = judged(other, result)
                    others.append(second)
                    print(run_line("also", other, result, second), flush=True)
                print(f"{'':<10}assumes: {'; '.join(stored.get('assumptions') or [])}")
                for line in forecast_parts.lines(result["parts"], stored):
                    print(f"{'':<10}{line}", flush=True)
        finally:
            stop_hogs(hogs)
    print(f"bench {time.perf_counter() - bench_started:.0f} s, load now {os.getloadavg()[0]:.1f}")
    if others:
        print(f"also ({args.also}): " + last_line(others, None))
    print(last_line(verdicts, agree))


if __name__ == "__main__":
    main()
