"""The home page's "Quick try" on the demo, on the real local models: does it visibly learn?

What a new user gets from ``make run``: the demo dataset and program (``bootstrap_demo``:
``team`` declared a label set, ``local/smollm2``), the launch form with the ``quick`` preset
(NearestFewShot with ``local/minilm``, one epoch) posted unchanged, its forecast, then the run
executed by the worker's own code (``execution.execute``, in this process: a private SQLite
database in a temp var/ dir, an in-memory channel layer). Printed: test reward before → after,
LM calls and embedding calls (forecast and actual), seconds, and whether some candidate beat
the seed (else the run page's next steps).

    .venv/bin/python bench/demo_quick_try.py

Last line: ``quick try: test before X → after Y, N LM calls, E embedding calls, S s``.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))


def setup(var_dir: str) -> None:
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ.update(DJANGO_SETTINGS_MODULE="project.settings", TRAINBOARD_VAR_DIR=var_dir)
    import django
    from django.conf import settings

    django.setup()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # the run page, below
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)  # a line per call otherwise
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    # As a worker does at start (project/celery.py): the run finds the local models loaded.
    from trainboard_local import preload

    preload.start_preload([settings.TRAINBOARD_LM, settings.TRAINBOARD_EMBEDDING_MODEL])
    preload.wait(timeout=300)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tb-quick-try-") as var_dir:
        setup(var_dir)
        from django.contrib.auth import get_user_model
        from django.http import QueryDict
        from django.test import Client

        from training.execution import attempt as execution
        from training.execution import forecast
        from training.insight import run_advice
        from training.models import Run
        from training.programs.demo import ensure_demo_program
        from training.runs.forms import RunForm
        from training.runs.prefill import initial_from_query

        user = get_user_model().objects.create_user("quick", password="a-long-password-1")
        program = ensure_demo_program(user)
        # the form as the home page's "Quick try" opens it, posted unchanged
        initial = initial_from_query(user, QueryDict(f"program={program.pk}&preset=quick"))
        form = RunForm(user=user, initial=initial)
        data = {}
        for name, field in form.fields.items():
            value = form.initial.get(name, field.initial)
            if value is None or value is False:
                continue
            data[name] = value
        posted = RunForm(data, user=user)
        assert posted.is_valid(), posted.errors
        client = Client()
        client.force_login(user)
        dataset, config = posted.cleaned_data["dataset"], posted.run_config
        predicted = forecast.forecast(program, dataset, config)["parts"]
        # launch() less its broker: the run is executed here, by the worker's code
        run = Run.objects.create(owner=user, program=program, dataset=dataset, config=config)
        print(
            f"optimizer {config['optimizer']['name']} {config['optimizer']['params']}, "
            f"epochs {config['epochs']}, train rows {run.dataset.train_count}, "
            f"test rows {run.dataset.test_count}"
        )
        started = time.monotonic()
        status = execution.execute(run.pk, run.attempt)
        seconds = time.monotonic() - started
        run.refresh_from_db()
        assert status == Run.SUCCEEDED, run.error
        embedding_calls = sum(
            int(figures.get("calls") or 0)
            for model, figures in (run.usage.get("by_model") or {}).items()
            if "minilm" in model
        )
        candidates, beat = run_advice.beat_seed_totals(run)
        print(
            f"forecast: {predicted['total']['expected']} LM calls "
            f"({predicted['total']['low']}–{predicted['total']['high']}), "
            f"{predicted['embeddings']['expected']} embedding requests "
            f"({predicted['embeddings']['low']}–{predicted['embeddings']['high']})"
        )
        print(f"selection: {beat} of {candidates} candidates beat the seed")
        page = client.get(run.get_absolute_url())
        shown = "run-next-steps" in page.content.decode()
        print(f"run page: HTTP {page.status_code}, next steps shown: {shown}")
        print(
            f"quick try: test before {run.baseline_reward:.3f} → after {run.final_reward:.3f}, "
            f"{run.lm_calls} LM calls, {embedding_calls} embedding calls, {seconds:.0f} s"
        )


if __name__ == "__main__":
    main()
