"""Resume: the rows of the abandoned partial epoch are dropped, usage adds up across
attempts."""

from __future__ import annotations

import pytest

from tests.training.conftest import make_run, run_config
from training.execution import attempt as execution
from training.models import Candidate, EpochLog, OptimizerError, Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_resume_deletes_candidates_and_errors_of_the_unfinished_epoch(user, program, demo_dataset):
    run = make_run(user, program, demo_dataset, run_config(epochs=1))
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    run.refresh_from_db()
    assert run.checkpoint_epoch == 0
    kept = set(Candidate.objects.filter(run=run).values_list("candidate_id", flat=True))
    assert kept
    state = run.checkpoint_json["compile"]["optimizer"]["state"]
    next_id = f"c{int(state['candidate_count']) + 1}"
    ghost = {"instructions": "ghost of the abandoned epoch"}
    for candidate_id in (next_id, "c999"):  # one the resumed run reuses, one it never does
        Candidate.objects.create(
            run=run,
            variable="generator/state",
            candidate_id=candidate_id,
            operation="few_shot",
            value=ghost,
            reward=1.0,
            status="scored",
            epoch=1,
        )
    OptimizerError.objects.create(
        run=run, epoch=1, variable="generator/state", operation="mutation", error="ghost"
    )
    OptimizerError.objects.create(
        run=run, epoch=0, variable="generator/state", operation="mutation", error="real"
    )
    # The attempt stopped mid-epoch 1 and was failed; resume it for a second epoch. The
    # epoch-0 error is one the checkpoint's optimizer reported (its count says so).
    state["errors_reported"] = 1
    run.checkpoint.save()
    run.config["epochs"] = 2
    run.save()
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED, attempt=2)

    assert execution.execute(run.pk, 2) == Run.SUCCEEDED

    assert not Candidate.objects.filter(run=run, value=ghost).exists()
    assert not Candidate.objects.filter(run=run, candidate_id="c999").exists()
    assert kept <= set(Candidate.objects.filter(run=run).values_list("candidate_id", flat=True))
    assert list(OptimizerError.objects.filter(run=run).values_list("error", flat=True)) == ["real"]
    assert list(EpochLog.objects.filter(run=run).values_list("epoch", flat=True)) == [0, 1]


def test_resumed_usage_adds_up_every_engine_counter_judge_failures_included():
    from training.execution.usage import merged_usage

    first = {"calls": 3, "judge_failures": 1, "parse_failures": 2, "cost": 0.0}
    second = {"calls": 4, "judge_failures": 2, "parse_failures": 0, "cost": 0.0}
    merged = merged_usage(first, second)
    assert (merged["calls"], merged["judge_failures"], merged["parse_failures"]) == (7, 3, 2)
