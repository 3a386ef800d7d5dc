"""Forecast accuracy: the launch form's forecast against what real runs did, on the local model.

For RandomFewShot and OMEGA, runs of three sizes on subsets of the builtin ``demo`` routing
dataset (``local/smollm2`` for the program and OMEGA's mutations, ``local/minilm`` for DNS):

1. the forecast is made as the launch form makes it: the trial (``forecast.run_trial``, a few
   predictions of the program on its model, here in this process as a worker would) and the
   counting rule (``forecast.forecast``: ``training.engine.forecast.count_calls``), stored in
   the run as at launch;
2. the run is executed by the worker's own code (``execution.execute``, in this process: a
   private SQLite database in a temp var/ dir, an in-memory channel layer);
3. actual LM calls (``Run.lm_calls``) and wall time (claim → finish) are compared with the
   forecast's expected calls and time.

Error of one run: |forecast − actual| / actual. Printed per run, then the mean over runs.
Aim: calls within 15 %, time within 35 %.

    .venv/bin/python bench/forecast_accuracy.py [--sizes S M L] [--optimizers RandomFewShot OMEGA]

Last line: ``forecast error: calls X %, time Y %``.
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


def one_run(user, program, dataset, optimizer: str, epochs: int, batch_size: int) -> dict:
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
    if status != Run.SUCCEEDED:
        raise SystemExit(f"run {run.pk} ended {status}: {run.error}")
    return {
        "forecast": predicted,
        "calls": run.lm_calls,
        "seconds": wall,
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
    call_errors, time_errors = [], []
    for size in args.sizes:
        train, test, epochs, batch_size = SIZES[size]
        dataset = subset(user, demo, train, test)
        program = program_for(user, dataset)
        for optimizer in args.optimizers:
            result = one_run(user, program, dataset, optimizer, epochs, batch_size)
            calls = result["forecast"]["calls"]
            seconds = result["forecast"]["seconds"]
            call_errors.append(error(calls["expected"], result["calls"]))
            time_errors.append(error(seconds["expected"], result["seconds"]))
            print(
                f"{optimizer:<14}{size:<5}"
                f"{calls['expected']:>8} ({calls['low']:>4}–{calls['high']:>4}){result['calls']:>8}"
                f"{call_errors[-1]:>6.0f}%"
                f"{seconds['expected']:>8.0f} s ({seconds['low']:>3.0f}–{seconds['high']:>3.0f} s)"
                f"{result['seconds']:>7.0f} s{time_errors[-1]:>6.0f}%",
                flush=True,
            )
    trial = result["trial"]
    print(
        f"trial (last dataset): {trial['single_call_seconds']:.2f} s a call alone, "
        f"{trial['seconds_per_call']:.2f} s a call in a batch, {trial['tokens_per_call']:.0f} tokens a call"
    )
    print(
        f"runs: {len(call_errors)} (train/test/epochs/batch: "
        + ", ".join(f"{s}={SIZES[s]}" for s in args.sizes)
        + f", validation_split {VALIDATION_SPLIT})"
    )
    print(
        f"forecast error: calls {sum(call_errors) / len(call_errors):.1f} %, "
        f"time {sum(time_errors) / len(time_errors):.1f} %"
    )


if __name__ == "__main__":
    main()
