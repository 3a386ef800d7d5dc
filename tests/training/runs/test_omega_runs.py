"""OMEGA runs end to end through the Celery task (in-process) with scripted fake models.

``fake/rules`` is the program's model and, by default, OMEGA's: its mutations add one rule
learnt from a wrong answer of the batch and its crossovers merge the parents' rules, so the
reward rises; ``fake/embedding`` gives DNS its distances. What must come out: candidates with
their operation, parents, novelty and kept/dropped/best status; skipped optimizer steps; and
pages that show them.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

import training.engine as synalinks
from tests.training.conftest import make_program, make_run, run_config
from training.execution.run_config import build_optimizer
from training.execution.tasks import execute_run
from training.models import Candidate, OptimizerError, Run
from training.programs.programs import program_from_json

OMEGA = {
    "optimizer": "OMEGA",
    "omega_embedding_model": "fake/embedding",
    "omega_population_size": 4,
    "omega_merging_rate": 0.5,
    "epochs": 3,
    "evaluations_before": 1,
    "evaluations_after": 1,
}


def omega_run(user, dataset, model="fake/rules", **overrides):
    program = make_program(user, dataset, model=model)
    config = run_config(model=model, **{**OMEGA, **overrides})
    return make_run(user, program, dataset, config)


def run_task(run: Run) -> Run:
    """The Celery task itself, executed in this process (no broker, no worker)."""
    result = execute_run.apply(args=[run.pk, run.attempt])
    assert result.successful(), result.traceback
    run.refresh_from_db()
    return run


def run_with_failing_mutations(user, dataset, epochs: int) -> Run:
    """An OMEGA run on ``fake/fewshot`` whose optimizer model fails every call, executed: every
    mutation fails, so nothing but the seed is ever scored."""
    failing = "fake/echo?failure_rate=1&failure=fatal"
    run = omega_run(user, dataset, "fake/fewshot", epochs=epochs, omega_language_model=failing)
    return run_task(run)


@pytest.mark.django_db(transaction=True)
def test_omega_run_persists_its_evolution_and_keeps_its_seed_without_evidence(
    client_user, user, demo_dataset
):
    run = run_task(omega_run(user, demo_dataset))
    assert run.status == Run.SUCCEEDED, run.error

    candidates = list(Candidate.objects.filter(run=run).order_by("epoch", "id"))
    by_id = {c.candidate_id: c for c in candidates}
    operations = {c.operation for c in candidates}
    assert {"seed", "mutation", "crossover"} <= operations
    statuses = [c.status for c in candidates]
    assert "kept" in statuses and "dropped" in statuses and statuses.count("best") == 1
    for candidate in candidates:
        if candidate.operation == "seed":
            assert candidate.parent_ids == []
        else:  # every parent was persisted too
            expected = 2 if candidate.operation == "crossover" else 1
            assert len(candidate.parent_ids) == expected
            assert all(parent in by_id for parent in candidate.parent_ids)
        if candidate.status in ("kept", "dropped"):  # scored by the DNS competition
            assert isinstance(candidate.novelty, float) and candidate.novelty >= 0.0
    mutations = [c for c in candidates if c.operation == "mutation"]
    assert any("By default, answer team=" in c.value["instructions"] for c in mutations)

    # fake/rules learns two of the nine validation rows: a higher mean, within noise, so the
    # run keeps its seed (never a program no better than its start beyond noise)
    seed = next(c for c in candidates if c.operation == "seed")
    best = next(c for c in candidates if c.status == "best")
    assert max(c.reward for c in candidates) > seed.reward
    assert best.candidate_id == seed.candidate_id
    assert run.final_reward == run.baseline_reward
    trained = program_from_json(run.trained_program_json)
    assert trained.get_variables()["generator/state"]["instructions"] == seed.value["instructions"]
    # OMEGA's mutation calls and DNS embeddings are in the run's usage
    assert run.usage["by_model"]["fake/rules"]["calls"] > 0
    assert run.usage["by_model"]["fake/embedding"]["calls"] > 0
    assert not OptimizerError.objects.filter(run=run).exists()

    # the run page: operation, parents (linked), novelty, kept/dropped counts
    html = client_user.get(run.get_absolute_url()).content.decode()
    board = html[html.index('id="run-leaderboard"') :]
    assert 'data-operation="mutation"' in board and 'data-operation="crossover"' in board
    crossover = next(c for c in candidates if c.operation == "crossover")
    assert crossover.candidate_id in board
    for parent_id in crossover.parent_ids:  # both parents, each linked to its own page
        assert f'href="{by_id[parent_id].get_absolute_url()}"' in board
    assert re.search(r'data-status="kept">\d+ kept', board)
    assert re.search(r'data-status="dropped">\d+ dropped', board)
    assert "status-dropped" in board and "status-kept" in board

    # the candidate page: a mutation's diff against its parent shows the added rule
    child = next(c for c in mutations if c.parent_ids and "When you see" in c.value["instructions"])
    page = client_user.get(child.get_absolute_url()).content.decode()
    parent = by_id[child.parent_ids[0]]
    assert f'href="{parent.get_absolute_url()}"' in page
    added = [
        line
        for line in child.value["instructions"].splitlines()
        if line not in parent.value["instructions"]
    ]
    assert added
    diff = page[page.index('id="candidate-diff"') :]
    assert re.search(r'class="diff-add">\+' + re.escape(added[0].replace('"', "&quot;")), diff)

    # a crossover's page diffs against both parents
    page = client_user.get(crossover.get_absolute_url()).content.decode()
    assert page.count("(parent)") == 2


@pytest.mark.django_db(transaction=True)
def test_failed_mutations_are_persisted_shown_and_do_not_stop_the_run(
    client_user, user, demo_dataset
):
    run = run_with_failing_mutations(user, demo_dataset, epochs=2)
    assert run.status == Run.SUCCEEDED, run.error
    errors = list(OptimizerError.objects.filter(run=run))
    assert errors and {e.operation for e in errors} == {"mutation"}
    assert all(e.variable == "generator/state" and "fake/echo" in e.error for e in errors)
    assert {e.epoch for e in errors} == {0, 1}
    # only the seed remains, and it is the best
    assert list(Candidate.objects.filter(run=run).values_list("operation", "status")) == [
        ("seed", "best")
    ]
    html = client_user.get(run.get_absolute_url()).content.decode()
    assert 'id="optimizer-errors"' in html
    assert f"{len(errors)} optimizer steps failed" in html
    # ... and the status panel says so, so a "Succeeded" that learnt nothing is not misread
    assert 'class="warning run-optimizer-errors"' in html
    assert f"{len(errors)} optimizer steps failed and were skipped" in html


def test_optimizer_models_default_to_the_programs_and_the_settings(settings):
    settings.TRAINBOARD_EMBEDDING_MODEL = "fake/embedding"
    optimizer = build_optimizer(run_config(model="fake/rules", optimizer="OMEGA"))
    assert isinstance(optimizer, synalinks.optimizers.OMEGA)
    assert optimizer.language_model.model == "fake/rules"
    assert isinstance(optimizer.embedding_model, synalinks.testing.FakeEmbeddingModel)
    assert optimizer.seed == 7  # the run's seed: a resumed run replays the same choices

    optimizer = build_optimizer(
        run_config(
            model="fake/rules",
            optimizer="OMEGA",
            omega_language_model="fake/echo",
            omega_embedding_model="fake/other",
        )
    )
    assert optimizer.language_model.model == "fake/echo"
    assert optimizer.embedding_model.model == "fake/other"

    settings.TRAINBOARD_EMBEDDING_MODEL = "nowhere/missing"
    optimizer = build_optimizer(run_config(optimizer="OMEGA", omega_algorithm="ga"))
    assert optimizer.embedding_model is None  # GA has no competition: no embedding model needed


@pytest.mark.django_db
def test_launch_form_takes_omega_model_overrides_and_refuses_bad_ones(
    client_user, user, demo_dataset, monkeypatch
):
    from tests.training.test_views import launch_data

    monkeypatch.setattr(
        "training.execution.tasks.execute_run.apply_async",
        lambda args, **options: type("R", (), {"id": "t1"})(),
    )
    program = make_program(user, demo_dataset, model="fake/rules")
    response = client_user.post(
        reverse("training:run-create"),
        launch_data(
            program,
            demo_dataset,
            optimizer="OMEGA",
            omega_language_model="fake/echo",
            omega_embedding_model="fake/embedding",
            omega_population_size="6",
        ),
    )
    assert response.status_code == 302
    params = Run.objects.get(owner=user).config["optimizer"]["params"]
    assert params["language_model"] == "fake/echo"
    assert params["embedding_model"] == "fake/embedding"
    assert params["population_size"] == 6

    response = client_user.post(
        reverse("training:run-create"),
        launch_data(program, demo_dataset, optimizer="OMEGA", omega_embedding_model="minilm"),
    )
    assert response.status_code == 200
    assert "must look like provider/name" in response.content.decode()
    assert Run.objects.filter(owner=user).count() == 1
