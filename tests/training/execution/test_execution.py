"""Executing runs in-process with scripted fake LMs: persistence, usage, failures, cancel."""

from __future__ import annotations

import pytest

from tests.training.conftest import make_program, make_run, run_config
from training.execution import attempt as execution
from training.models import Candidate, EpochLog, Evaluation, Run
from training.programs.programs import program_from_json

pytestmark = pytest.mark.django_db(transaction=True)


def launch(user, program, dataset, **overrides):
    return make_run(user, program, dataset, run_config(**overrides))


def test_run_persists_epochs_candidates_evaluations_and_learns(user, program, demo_dataset):
    run = launch(user, program, demo_dataset)
    assert execution.execute(run.pk, run.attempt, worker="test@host") == Run.SUCCEEDED
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED and run.error == ""
    assert list(EpochLog.objects.filter(run=run).values_list("epoch", flat=True)) == [0, 1]
    logs = EpochLog.objects.get(run=run, epoch=1).logs
    assert {"reward", "val_reward", "f1_score", "val_f1_score"} <= set(logs)
    assert Evaluation.objects.filter(run=run, phase="before").count() == 2
    assert Evaluation.objects.filter(run=run, phase="after").count() == 2
    # fake/fewshot answers the majority label of its examples: 0 before, > 0 after training
    assert run.baseline_reward == 0.0
    assert run.final_reward > 0.0 and run.improvement > 0
    assert run.best_reward is not None
    assert Candidate.objects.filter(run=run, operation="seed").exists()
    assert Candidate.objects.filter(run=run, operation="few_shot").exists()
    assert Candidate.objects.filter(run=run, status="best").count() == 1
    assert run.lm_calls > 0 and run.usage["calls"] == run.lm_calls
    assert (
        run.current_epoch == 2 and run.batches_per_epoch == 4
    )  # 36 train rows, 9 for validation, batches of 8
    trained = program_from_json(run.trained_program_json)
    assert trained.get_variables()["generator/state"]["examples"]
    assert run.checkpoint_epoch == 1


def test_flaky_lm_finishes_and_counts_failures(user, demo_dataset):
    program = make_program(user, demo_dataset, model="fake/fewshot?failure_rate=0.3&failure=fatal")
    run = launch(user, program, demo_dataset, evaluations_before=1, evaluations_after=1)
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    assert run.lm_failures > 0
    assert run.failed_predictions > 0


def test_unreachable_lm_fails_fast_naming_model_and_address(user, demo_dataset):
    program = make_program(user, demo_dataset, model="fake/unreachable")
    run = launch(user, program, demo_dataset)
    assert execution.execute(run.pk, run.attempt) == Run.FAILED
    run.refresh_from_db()
    assert "fake/unreachable" in run.error and "unreachable" in run.error.lower()
    assert "scripted fake provider" in run.error
    assert (run.finished_at - run.started_at).total_seconds() < 15


def test_stale_attempt_is_skipped(user, program, demo_dataset):
    run = launch(user, program, demo_dataset)
    assert execution.execute(run.pk, run.attempt + 1) == "skipped"
    run.refresh_from_db()
    assert run.status == Run.QUEUED
