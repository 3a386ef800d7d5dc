"""A run claimed while its worker still loads the local models shows the phase "loading
models" (status partial, live), waits for the load, then runs; Cancel ends the wait."""

from __future__ import annotations

import threading

import pytest

from tests.support.waiting import until
from tests.training.conftest import make_program, make_run, run_config
from trainboard_local import preload
from training.execution import model_loading
from training.execution.attempt import execute
from training.models import Run

MODEL = "fake/fewshot"


@pytest.fixture
def slow_preload(monkeypatch):
    """The real preload machinery, with the program's model as the one to load: it loads
    until the test releases it."""
    release = threading.Event()
    monkeypatch.setattr(preload, "LOADERS", {MODEL: lambda: release.wait(120)})
    monkeypatch.setattr(preload, "_states", {})
    monkeypatch.setattr(preload, "_seconds", {})
    monkeypatch.setattr(preload, "_thread", None)
    preload.start_preload([MODEL])
    yield release
    release.set()
    preload.wait(30)


def run_on_a_worker_thread(user, dataset) -> tuple[Run, threading.Thread, dict]:
    """A run of a program on MODEL, executed on a thread of its own as a worker would, so
    that the test can watch it wait for the load: (the run, the thread, the dict the run's
    final status lands in under ``"status"``)."""
    program = make_program(user, dataset, model=MODEL)
    run = make_run(user, program, dataset, run_config(model=MODEL))
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(status=execute(run.pk, 1)))
    worker.start()
    return run, worker, outcome


def test_models_of_names_every_model_a_run_uses(settings):
    settings.TRAINBOARD_EMBEDDING_MODEL = "local/minilm"
    config = run_config(model=MODEL, optimizer="OMEGA", omega_embedding_model="")
    assert model_loading.models_of(config) == [MODEL, "local/minilm"]
    assert model_loading.models_of(run_config(model=MODEL)) == [MODEL]


@pytest.mark.django_db(transaction=True)
def test_run_names_the_loading_phase_then_runs(client_user, user, demo_dataset, slow_preload):
    run, worker, outcome = run_on_a_worker_thread(user, demo_dataset)
    try:
        until(
            lambda: Run.objects.get(pk=run.pk).phase == "loading models",
            60,
            "the run's phase said loading models",
        )
        html = client_user.get(run.get_absolute_url()).content.decode()
        assert '<span class="muted run-phase">loading models</span>' in html
        assert "still loading the local models" in html
        assert Run.objects.get(pk=run.pk).evaluations.count() == 0  # nothing ran yet
    finally:
        slow_preload.set()
        worker.join(300)
    assert outcome["status"] == Run.SUCCEEDED
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED and run.phase == ""
    assert run.evaluations.count() == 4  # 2 before + 2 after: it ran once the load was done


@pytest.mark.django_db(transaction=True)
def test_cancel_ends_the_wait_for_models(user, demo_dataset, slow_preload):
    run, worker, outcome = run_on_a_worker_thread(user, demo_dataset)
    try:
        until(
            lambda: Run.objects.get(pk=run.pk).phase == "loading models",
            60,
            "the run's phase said loading models",
        )
        Run.objects.filter(pk=run.pk).update(cancel_requested=True)
        worker.join(120)
    finally:
        slow_preload.set()
        worker.join(120)
    assert outcome["status"] == Run.CANCELLED
    assert Run.objects.get(pk=run.pk).evaluations.count() == 0
