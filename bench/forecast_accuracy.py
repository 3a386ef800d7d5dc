"""Forecast accuracy: the launch form's forecast against what real runs did, on the local model.

For RandomFewShot and OMEGA, runs of three sizes on subsets of the builtin ``demo`` routing
dataset (``local/smollm2`` for the program and OMEGA's mutations, ``local/minilm`` for DNS):

1. the forecast is made as the launch form makes it: the trial (``forecast.run_trial``, a few
   predictions of the program on its model, here in this process as a worker would) and the
   counting rule (``forecast.forecast``: ``training.engine.forecast.count_calls``), stored in
   the run as at launch;
2. the run is executed by the worker's own code (``execution.execute``, in this process: a
   private SQLite database in a temp var/ dir, an in-memory channel layer);
3. actual LM calls (``Run.lm_calls``), tokens (``Run.usage``) and wall time (claim → finish)
   are compared with the forecast's expected calls, tokens and time;
4. with ``--caps`` (the default) each configuration runs once more with caps at
   ``--cap-share`` of its forecast (calls, and minutes): every cap against what the run used
   (``Run.lm_calls``, ``Run.active_seconds``). Overshoot: how far past its cap a run went
   (0 when at or under), in the cap's units, the most over the capped runs.

Error of one run: |forecast − actual| / actual. Printed per run, then the mean over runs.
Aim: calls within 15 %, tokens within 25 %, time within 35 %, overshoot 0.

    nice .venv/bin/python bench/forecast_accuracy.py [--sizes S M L] \
        [--optimizers RandomFewShot OMEGA] [--no-caps] [--cap-share 0.5]

Last line: ``forecast: calls E1 %, tokens E2 %, time E3 %; caps overshoot O (max over runs)``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

#: (train rows, test rows, epochs, batch size): small on purpose (a loaded 2-core box).
SIZES = {
    "S": (8, 4, 1, 4),
    "M": (12, 4, 2, 4),
    "L": (16, 6, 2, 8),
}
VALIDATION_SPLIT = 0.25
MAX_TOKENS = 32


def setup(var_dir: str) -> None:
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
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    # As a worker does at start (project/celery.py): runs find the local models loaded.
    from training.engine.local import preload

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


def program_for(user, dataset):
    from tests.training.helpers_programs import make_program

    instructions = "Route the support message to the right team."
    return make_program(
        user, dataset, model="local/smollm2", instructions=instructions, max_tokens=MAX_TOKENS
    )


def one_run(
    user, program, dataset, optimizer: str, epochs: int, batch_size: int, caps: dict | None = None
) -> dict:
    from training.execution import attempt as execution
    from training.execution import forecast as forecast_services
    from training.execution.run_config import validate_run_config
    from training.models import Run

    targets = dataset.target_names
    config = validate_run_config(
        {
            "reward": "ExactMatch",
            "optimizer": optimizer,
            "epochs": epochs,
            "batch_size": batch_size,
            "validation_split": VALIDATION_SPLIT,
            "seed": 1,
            "evaluations_before": 1,
            "evaluations_after": 1,
            **(caps or {}),
        },
        targets,
        targets,
        "local/smollm2",
    )
    mutation_model = forecast_services.optimizer_model(config)
    key = forecast_services.trial_key(program, dataset, mutation_model)
    state = forecast_services.trial_state(
        program, dataset, start=False, mutation_model=mutation_model
    )
    if state["state"] != "ready":  # the trial, as the worker task runs it; cached
        state = forecast_services._remember(
            key, forecast_services.run_trial(program, dataset, mutation_model)
        )
        if state["state"] != "ready":
            raise SystemExit(f"trial failed: {state.get('message')}")
    predicted = forecast_services.at_launch(program, dataset, config)
    run = Run.objects.create(
        owner=user, program=program, dataset=dataset, config=config, forecast=predicted
    )
    started = time.perf_counter()
    status = execution.execute(run.pk, run.attempt, worker="bench")
    wall = time.perf_counter() - started
    run.refresh_from_db()
    if status != Run.SUCCEEDED and not (caps and status == Run.STOPPED):
        raise SystemExit(f"run {run.pk} ended {status}: {run.error}")
    usage = run.usage or {}
    return {
        "forecast": predicted,
        "status": status,
        "error": run.error,
        "calls": run.lm_calls,
        "tokens": int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0),
        "seconds": wall,
        "minutes": run.active_seconds / 60.0,
        "after": run.evaluations.filter(phase="after").exists(),
        "trial": state["trial"],
    }


def error(forecast: float, actual: float) -> float:
    return 100.0 * abs(forecast - actual) / actual if actual else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument(
        "--optimizers",
        nargs="+",
        default=["RandomFewShot", "OMEGA"],
        choices=["RandomFewShot", "OMEGA"],
    )
    parser.add_argument("--no-caps", action="store_true", help="skip the capped runs")
    parser.add_argument(
        "--cap-share", type=float, default=0.5, help="caps: this share of the forecast"
    )
    args = parser.parse_args()
    var_dir = tempfile.mkdtemp(prefix="tb-forecast-bench-")
    setup(var_dir)
    from django.contrib.auth import get_user_model

    from datasets.services import import_builtin

    user, _ = get_user_model().objects.get_or_create(username="bench")
    demo = import_builtin(user, "demo")
    print(
        f"{'optimizer':<14}{'size':<5}{'calls forecast':>22}{'actual':>8}{'err':>7}"
        f"{'time forecast':>22}{'actual':>9}{'err':>7}"
    )
    call_errors, token_errors, time_errors = [], [], []
    capped: list[str] = []
    overshoot = {"calls": 0.0, "minutes": 0.0}
    for size in args.sizes:
        train, test, epochs, batch_size = SIZES[size]
        dataset = subset(user, demo, train, test)
        program = program_for(user, dataset)
        for optimizer in args.optimizers:
            result = one_run(user, program, dataset, optimizer, epochs, batch_size)
            calls = result["forecast"]["calls"]
            seconds = result["forecast"]["seconds"]
            tokens = result["forecast"]["tokens"]
            call_errors.append(error(calls["expected"], result["calls"]))
            token_errors.append(error(tokens["expected"], result["tokens"]))
            time_errors.append(error(seconds["expected"], result["seconds"]))
            print(
                f"{optimizer:<14}{size:<5}"
                f"{calls['expected']:>8} ({calls['low']:>4}–{calls['high']:>4}){result['calls']:>8}"
                f"{call_errors[-1]:>6.0f}%"
                f"{seconds['expected']:>8.0f} s ({seconds['low']:>3.0f}–{seconds['high']:>3.0f} s)"
                f"{result['seconds']:>7.0f} s{time_errors[-1]:>6.0f}%"
                f"   tokens {tokens['expected']:>6} vs {result['tokens']:>6}{token_errors[-1]:>5.0f}%",
                flush=True,
            )
            if args.no_caps:
                continue
            caps = {
                "budget_calls": max(1, int(calls["expected"] * args.cap_share)),
                "budget_minutes": max(0.1, round(seconds["expected"] * args.cap_share / 60, 1)),
            }
            run = one_run(user, program, dataset, optimizer, epochs, batch_size, caps)
            over_calls = max(0, run["calls"] - caps["budget_calls"])
            over_minutes = max(0.0, run["minutes"] - caps["budget_minutes"])
            overshoot["calls"] = max(overshoot["calls"], over_calls)
            overshoot["minutes"] = max(overshoot["minutes"], over_minutes)
            capped.append(
                f"{optimizer:<14}{size:<5}caps {caps['budget_calls']} calls, "
                f"{caps['budget_minutes']:.1f} min: used {run['calls']} calls, "
                f"{run['minutes']:.2f} min ({run['status']}, after-evaluation "
                f"{'stored' if run['after'] else 'skipped'})"
            )
            print(capped[-1], flush=True)
    trial = result["trial"]
    print(
        f"trial (last dataset): {trial['single_call_seconds']:.2f} s a call alone, "
        f"{trial['seconds_per_call']:.2f} s a call in a batch, {trial['tokens_per_call']:.0f} tokens a call"
    )
    print(
        f"runs: {len(call_errors)} uncapped, {len(capped)} capped (train/test/epochs/batch: "
        + ", ".join(f"{s}={SIZES[s]}" for s in args.sizes)
        + f", validation_split {VALIDATION_SPLIT})"
    )

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    shown = (
        f"{overshoot['calls']:.0f} calls, {overshoot['minutes'] * 60:.1f} s" if capped else "n/a"
    )
    print(
        f"forecast: calls {mean(call_errors):.1f} %, tokens {mean(token_errors):.1f} %, "
        f"time {mean(time_errors):.1f} %; caps overshoot {shown} (max over runs)"
    )


if __name__ == "__main__":
    main()
