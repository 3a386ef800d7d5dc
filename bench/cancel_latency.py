"""Cancel latency: from pressing Cancel to the run being Cancelled, on the local model.

Runs the worker's ``execution.execute`` in this process (a private SQLite database in a temp
var/ dir, an in-memory channel layer) on ``local/smollm2`` with 64 test examples, batches of
8, and presses Cancel (``runs.request_cancel``, what the button does) twice:

1. during the run's before-training evaluation (64 predictions: Cancel must not wait for the
   whole evaluation);
2. during training (a run without evaluations: Cancel must not wait for the batch).

Each press comes a few seconds into the phase, so LM calls are in flight. The baseline, from
the same run: the mean latency of one local LM call (the engine's usage records), since
"within about one LM call" is the goal; aim: both latencies < 10 s.

    .venv/bin/python bench/cancel_latency.py [--wait 6]

Last line: ``cancel latency: evaluation X s, training Y s``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
TEST_EXAMPLES = 64
AIM_SECONDS = 10.0


def setup(var_dir: str) -> None:
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ.update(DJANGO_SETTINGS_MODULE="project.settings", TRAINBOARD_VAR_DIR=var_dir)
    import django
    from django.conf import settings

    django.setup()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def make_run(evaluations_before: int):
    from django.contrib.auth import get_user_model

    from datasets.models import DatasetRow
    from datasets.services import import_builtin
    from tests.training.helpers_programs import make_program
    from training.execution.run_config import validate_run_config
    from training.models import Run

    user, _ = get_user_model().objects.get_or_create(username="bench")
    dataset = import_builtin(user, "tweeteval_sentiment")
    # 64 test examples, the rest for training.
    rows = DatasetRow.objects.filter(dataset=dataset)
    rows.filter(index__lt=TEST_EXAMPLES).update(split=DatasetRow.TEST)
    rows.filter(index__gte=TEST_EXAMPLES).update(split=DatasetRow.TRAIN)
    dataset.test_count = TEST_EXAMPLES
    dataset.train_count = dataset.row_count - TEST_EXAMPLES
    dataset.save()
    program = make_program(
        user,
        dataset,
        model="local/smollm2",
        name="Sentiment",
        instructions="Label the tweet's sentiment: negative, neutral or positive.",
        max_tokens=32,
    )
    targets = dataset.target_names
    config = validate_run_config(
        {
            "reward": "ExactMatch",
            "optimizer": "RandomFewShot",
            "epochs": 1,
            "batch_size": 8,
            "validation_split": 0.0,
            "seed": 1,
            "evaluations_before": evaluations_before,
            "evaluations_after": 0,
        },
        targets,
        targets,
        "local/smollm2",
    )
    return Run.objects.create(owner=user, program=program, dataset=dataset, config=config)


def cancel_during(evaluations_before: int, phase: str, wait: float) -> tuple[float, dict]:
    """Seconds from Cancel to the worker's end, pressed ``wait`` s into ``phase``."""
    from django.db import connection

    from training.execution import attempt as execution
    from training.models import Run
    from training.runs import launch as runs

    run = make_run(evaluations_before)
    outcome: dict = {}

    def worker():
        outcome["status"] = execution.execute(run.pk, run.attempt, worker="bench")
        connection.close()

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        current = Run.objects.get(pk=run.pk)
        if current.phase.startswith(phase):
            break
        if current.status not in (Run.QUEUED, Run.RUNNING):
            raise SystemExit(f"run ended before {phase!r}: {current.status} {current.error}")
        time.sleep(0.2)
    time.sleep(wait)
    pressed = time.perf_counter()
    runs.request_cancel(Run.objects.get(pk=run.pk))
    thread.join(timeout=600)
    latency = time.perf_counter() - pressed
    final = Run.objects.get(pk=run.pk)
    usage = final.usage or {}
    outcome.update(
        final=final.status,
        calls=final.lm_calls,
        call_latency=(usage.get("latency") or 0.0) / max(1, usage.get("calls") or 0),
    )
    return latency, outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wait", type=float, default=6.0, help="seconds into the phase")
    args = parser.parse_args()
    setup(tempfile.mkdtemp(prefix="trainboard-cancel-bench-"))
    evaluation, eval_outcome = cancel_during(1, "before eval", args.wait)
    print(f"evaluation: cancelled after {evaluation:.2f} s -> {eval_outcome}", flush=True)
    training, train_outcome = cancel_during(0, "training", args.wait)
    print(f"training: cancelled after {training:.2f} s -> {train_outcome}", flush=True)
    call = max(eval_outcome["call_latency"], train_outcome["call_latency"])
    print(f"baseline: one local LM call takes {call:.2f} s on average (same run)")
    ok = max(evaluation, training) < AIM_SECONDS
    ok = ok and eval_outcome["final"] == train_outcome["final"] == "cancelled"
    print(f"aim: both < {AIM_SECONDS:g} s: {'met' if ok else 'NOT met'}")
    print(f"cancel latency: evaluation {evaluation:.1f} s, training {training:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
