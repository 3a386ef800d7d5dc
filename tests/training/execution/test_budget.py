"""Budget caps: a run stops cleanly at or under its cap (no call starts that the cap cannot
afford), keeps what it found, evaluates its best program with the calls held for it, ends
"stopped: budget reached", and resumes with a higher cap (never with one already used)."""

from __future__ import annotations

import pytest
from django.db.models import Sum

from tests.training.conftest import make_program, run_config
from training.execution import attempt as execution
from training.execution import budget
from training.execution.run_config import RunConfigError
from training.models import Candidate, EpochLog, Evaluation, LMCallTrace, Run
from training.runs import launch
from training.runs.forms import ResumeBudgetForm

pytestmark = pytest.mark.django_db(transaction=True)


def omega_run(user, dataset, **overrides) -> Run:
    program = make_program(user, dataset, model="fake/rules")
    values = {
        "optimizer": "OMEGA",
        "model": "fake/rules",
        "omega_embedding_model": "fake/minilm",
        "epochs": 3,
        "batch_size": 4,
        "evaluations_before": 1,
        "evaluations_after": 1,
    }
    config = run_config(**{**values, **overrides})
    return Run.objects.create(owner=user, program=program, dataset=dataset, config=config)


def test_a_calls_cap_is_never_passed_and_the_best_program_is_still_evaluated(user, demo_dataset):
    run = omega_run(user, demo_dataset, budget_calls=40)
    assert execution.execute(run.pk, 1) == Run.STOPPED
    run.refresh_from_db()
    assert run.error.startswith("stopped: budget reached (")
    assert "used, cap 40 LM calls" in run.error
    # The cap is a promise: every request counts (cancelled and retried ones included), and
    # the traces of the calls, written one per attempt's call, agree.
    assert run.lm_calls <= 40
    assert run.usage["calls"] <= 40
    traced = LMCallTrace.objects.filter(run=run, kind="completion", cache_hit=False)
    assert 0 < traced.aggregate(attempts=Sum("attempts"))["attempts"] <= 40
    assert run.trained_program_json is not None  # the best program so far
    assert Candidate.objects.filter(run=run).exists()
    assert Evaluation.objects.filter(run=run, phase="before").count() == 1
    # ... evaluated on the test split with the calls held back for it
    assert Evaluation.objects.filter(run=run, phase="after").count() == 1
    assert "the best program so far was evaluated on the test split" in run.error
    assert f"({run.lm_calls} LM calls used, cap 40 LM calls)" in run.error  # final count
    assert run.can_resume and run.active_seconds > 0
    assert budget.stopped_by(run) == "budget_calls"


def test_a_minutes_cap_cuts_the_run_at_its_deadline(user, demo_dataset):
    # 0.1 min = 6 s; every call takes 0.4 s, and the run would take far longer.
    program = make_program(user, demo_dataset, model="fake/fewshot?latency=0.4")
    config = run_config(epochs=20, batch_size=4, budget_minutes=0.1)
    run = Run.objects.create(owner=user, program=program, dataset=demo_dataset, config=config)
    assert execution.execute(run.pk, 1) == Run.STOPPED
    run.refresh_from_db()
    assert run.active_seconds <= 6.0  # at or under the cap, the wrap-up included
    assert run.active_seconds > 3.0  # it worked until close to it
    assert budget.stopped_by(run) == "budget_minutes"


@pytest.mark.parametrize("cap", [17, 33, 61])
def test_a_run_makes_at_most_its_calls_cap(user, demo_dataset, cap):
    run = omega_run(user, demo_dataset, budget_calls=cap)
    assert execution.execute(run.pk, 1) == Run.STOPPED
    run.refresh_from_db()
    assert run.lm_calls <= cap
    assert run.lm_calls >= 1  # it spent, up to its cap


def test_resume_with_a_higher_cap_goes_on_to_the_end(user, demo_dataset, no_broker):
    run = omega_run(user, demo_dataset, budget_calls=40)
    assert execution.execute(run.pk, 1) == Run.STOPPED
    run.refresh_from_db()
    stopped_calls, stopped_seconds = run.lm_calls, run.active_seconds

    with pytest.raises(budget.BudgetError, match="must be above what the run has used"):
        launch.resume_with_caps(run, {"budget_calls": stopped_calls})
    run.refresh_from_db()
    assert run.status == Run.STOPPED and run.config["budget_calls"] == 40

    run = launch.resume_with_caps(run, {"budget_calls": 100_000})
    assert run.status == Run.QUEUED and run.attempt == 2 and run.error == ""
    assert run.config["budget_calls"] == 100_000
    assert execution.execute(run.pk, 2) == Run.SUCCEEDED
    run.refresh_from_db()
    assert run.lm_calls > stopped_calls and run.active_seconds > stopped_seconds
    assert list(EpochLog.objects.filter(run=run).values_list("epoch", flat=True)) == [0, 1, 2]
    assert Evaluation.objects.filter(run=run, phase="before").count() == 1  # not repeated
    assert Evaluation.objects.filter(run=run, phase="after").count() == 1


def test_a_minutes_cap_counts_the_earlier_attempts_time(user, demo_dataset):
    run = omega_run(user, demo_dataset, budget_minutes=1.0)
    Run.objects.filter(pk=run.pk).update(active_seconds=60.0)  # spent by an earlier attempt
    assert execution.execute(run.pk, 1) == Run.STOPPED
    run.refresh_from_db()
    assert run.error.startswith("stopped: budget reached (1.0 min used, cap 1.0 min)")
    assert run.lm_calls == 0  # checked before the first evaluation: nothing was spent
    assert not Evaluation.objects.exists()


def test_a_run_without_caps_is_not_watched_and_records_its_working_time(user, demo_dataset):
    run = omega_run(user, demo_dataset, epochs=1)
    assert run.config["budget_calls"] is None and run.config["budget_minutes"] is None
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    run.refresh_from_db()
    assert run.active_seconds > 0 and run.error == ""


def test_caps_are_bounded_once_and_reported_on_their_field():
    with pytest.raises(RunConfigError) as caught:
        run_config(budget_calls=0, budget_cost=-1, budget_minutes="soon")
    errors = caught.value.errors
    assert errors["budget_calls"].startswith("must be")
    assert errors["budget_cost"].startswith("must be")
    assert errors["budget_minutes"].startswith("must be")
    config = run_config(budget_calls=25, budget_cost="", budget_minutes=2.5)
    assert (config["budget_calls"], config["budget_cost"], config["budget_minutes"]) == (
        25,
        None,
        2.5,
    )


def test_an_unknown_price_never_reaches_a_cost_cap():
    caps = {"budget_calls": None, "budget_cost": 1.0, "budget_minutes": None}
    assert (
        budget.reached(caps, {"budget_calls": 5, "budget_cost": None, "budget_minutes": 9}) is None
    )
    used = {"budget_calls": 5, "budget_cost": 1.5, "budget_minutes": 9}
    assert budget.reached(caps, used) == "budget_cost"
    assert budget.message("budget_cost", used, caps).startswith(
        "stopped: budget reached ($1.50 used, cap $1.00)"
    )


def test_resume_form_refuses_a_bad_cap_with_a_message(client_user, user, demo_dataset, no_broker):
    from django.urls import reverse

    run = omega_run(user, demo_dataset, budget_calls=40)
    assert execution.execute(run.pk, 1) == Run.STOPPED
    response = client_user.post(
        reverse("training:run-resume-budget", args=[run.pk]), {"budget_calls": "0"}, follow=True
    )
    assert "Cap on LM calls: must be" in response.content.decode()
    run.refresh_from_db()
    assert run.status == Run.STOPPED and no_broker == []
    client_user.post(reverse("training:run-resume-budget", args=[run.pk]), {"budget_calls": "500"})
    run.refresh_from_db()
    assert run.status == Run.QUEUED and no_broker == [[run.pk, 2]]


def test_another_users_run_cannot_be_resumed(client, other_user, user, demo_dataset, no_broker):
    from django.urls import reverse

    run = omega_run(user, demo_dataset, budget_calls=40)
    Run.objects.filter(pk=run.pk).update(status=Run.STOPPED)
    client.force_login(other_user)
    response = client.post(
        reverse("training:run-resume-budget", args=[run.pk]), {"budget_calls": "500"}
    )
    assert response.status_code == 404 and no_broker == []


def test_the_resume_form_offers_caps_that_resume_accepts(user, demo_dataset, no_broker):
    # A run past its time cap (5 minutes, 6.8 used) and under its calls cap: the form must
    # not offer 5 minutes, which resume would refuse.
    run = omega_run(user, demo_dataset, budget_calls=400, budget_minutes=5.0)
    Run.objects.filter(pk=run.pk).update(
        status=Run.STOPPED, active_seconds=6.8 * 60, lm_calls=55, usage={"calls": 55}
    )
    run.refresh_from_db()
    form = ResumeBudgetForm(run=run)
    offered = {key: form.fields[key].initial for key in budget.BUDGET}
    assert offered == {"budget_calls": 455, "budget_cost": None, "budget_minutes": 11.8}
    resumed = launch.resume_with_caps(run, offered)
    assert resumed.status == Run.QUEUED
    assert resumed.config["budget_minutes"] == 11.8 and resumed.config["budget_calls"] == 455
