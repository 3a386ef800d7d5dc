"""Re-scoring a finished run without re-running it: every scored
candidate keeps its validation predictions (bounded), and a finished run's before/after and
candidates are scored again from them on a new dataset version or with another reward, with
no program call (the LMCallTrace count stays); a judge re-score goes to a worker after its
forecast. Runs executed here for real with the scripted fake models.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from datasets import versions
from tests.training.conftest import make_program
from tests.training.runs.test_omega_runs import omega_run, run_task
from training.engine.trainers.candidate_scores import MAX_EXAMPLE_PREDICTIONS
from training.execution.recording import candidate_predictions
from training.insight import rescore_jobs, rescoring
from training.models import Candidate, LMCallTrace, RescoreJob, Run

HTMX = {"HTTP_HX_REQUEST": "true"}


def rescore_page(client, run, **params):
    response = client.get(reverse("training:run-rescore", args=[run.pk]), params, **HTMX)
    assert response.status_code == 200
    return response


def omega(user, dataset):
    # seed 2: a population whose top candidates answer some validation row differently
    return run_task(omega_run(user, dataset, epochs=2, seed=2))


@pytest.mark.django_db(transaction=True)
def test_every_scored_candidate_keeps_its_validation_predictions(user, demo_dataset):
    run = omega(user, demo_dataset)
    assert run.status == Run.SUCCEEDED
    scored = Candidate.objects.filter(run=run, example_rewards__isnull=False)
    assert scored.count() >= 3
    for candidate in scored:
        predictions = candidate.example_predictions
        assert len(predictions) == min(len(candidate.example_rewards), MAX_EXAMPLE_PREDICTIONS)
        assert predictions and all(p is not None and set(p) >= {"team"} for p in predictions)


@pytest.mark.django_db(transaction=True)
def test_rescoring_on_the_runs_own_version_gives_back_what_each_candidate_measured(
    client_user, user, demo_dataset
):
    run = omega(user, demo_dataset)
    traces = LMCallTrace.objects.count()
    assert traces > 0
    result = rescore_page(client_user, run, version=run.dataset.version).context["rescored"]
    candidates = result["candidates"]
    ids = set(Candidate.objects.filter(run=run).values_list("candidate_id", flat=True))
    assert {c["candidate_id"] for c in candidates} == ids
    for entry in candidates:  # the same rows, the same reward: the same figures
        assert entry["new"] == pytest.approx(entry["old"])
        assert not entry["rank_changed"] and entry["changed_examples"] == 0
    for phase in result["phases"]:
        assert phase["new"] == pytest.approx(phase["old"]) and phase["changed"] == []
    assert LMCallTrace.objects.count() == traces  # no program call


@pytest.mark.django_db(transaction=True)
def test_corrections_published_as_v2_rescore_candidates_and_change_their_rank(
    client_user, user, demo_dataset
):
    run = omega(user, demo_dataset)
    traces = LMCallTrace.objects.count()
    entries = rescore_page(client_user, run, version=1).context["rescored"]["candidates"]
    top = [e for e in entries if e["old_rank"] == 1]
    stored = {c.candidate_id: c.example_predictions for c in Candidate.objects.filter(run=run)}
    rows = rescoring.validation_rows(rescoring._Scorer(run, run.dataset, None))
    # A top candidate that answered one validation row unlike every other top one, and
    # wrongly: that row's right answer becomes its answer in v2.
    found = [
        (entry, position, stored[entry["candidate_id"]][position]["team"])
        for entry in top
        for position in range(entry["examples"])
        if (answer := (stored[entry["candidate_id"]][position] or {}).get("team"))
        and answer != rows[position][1]["team"]
        and all(
            (stored[o["candidate_id"]][position] or {}).get("team") != answer
            for o in top
            if o is not entry
        )
    ]
    assert found and len(top) > 1  # the fake run's population differs there
    winner, position, answer = found[0]
    versions.record(user, run.dataset, rows[position][0], "answer", {"team": answer})
    v2 = versions.publish(user, run.dataset)
    assert v2.version == 2 and versions.line_root(v2).pk == versions.line_root(run.dataset).pk
    response = rescore_page(client_user, run, version=2)
    now = {c["candidate_id"]: c for c in response.context["rescored"]["candidates"]}
    assert now[winner["candidate_id"]]["new"] == pytest.approx(
        winner["old"] + 1 / winner["examples"]
    )
    assert now[winner["candidate_id"]]["new_rank"] == 1
    others = [o["candidate_id"] for o in top if o is not winner]
    assert all(now[o]["rank_changed"] and now[o]["new_rank"] == 2 for o in others)
    html = response.content.decode()
    for other in others:
        assert f'data-candidate="{other}" data-rank-changed="yes"' in html
    assert LMCallTrace.objects.count() == traces  # scored from the stored predictions
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED  # the stored figures stay what the run measured


@pytest.mark.django_db(transaction=True)
def test_a_reward_change_rescores_with_peoples_marks_without_a_program_call(
    client_user, user, demo_dataset
):
    run = omega(user, demo_dataset)
    traces = LMCallTrace.objects.count()
    same = rescore_page(client_user, run, reward="ExactMatch").context["rescored"]
    assert not same["reward_changed"]  # ExactMatch, no marks, no mask: the run's own
    assert all(c["new"] == pytest.approx(c["old"]) for c in same["candidates"])
    marked = rescore_page(client_user, run, reward="ExactMatch", people="1")
    assert marked.context["rescored"]["reward_changed"] is True
    assert marked.context["rescored"]["spec"]["judge_by_people"] is True
    assert 'id="rescore-with">Scored with ExactMatch, people\'s marks first' in (
        marked.content.decode()
    )
    assert LMCallTrace.objects.count() == traces
    refused = rescore_page(client_user, run, reward="CosineSimilarity")
    assert "not a reward re-scoring offers" in refused.context["rescore_error"]


@pytest.mark.django_db(transaction=True)
def test_a_judge_rescore_shows_its_forecast_then_runs_in_a_worker(
    client_user, user, demo_dataset, monkeypatch
):
    run = omega(user, demo_dataset)
    traces = LMCallTrace.objects.count()
    forecast = rescore_page(
        client_user, run, reward="LMAsJudge", judge_model="fake/judge", criteria="right team"
    ).context["judge_forecast"]
    tests = sum(
        1 for e in run.evaluations.all() for x in e.examples.all() if x.prediction is not None
    )
    assert forecast["calls"] == rescoring.judge_calls(run) and forecast["calls"] > tests
    assert not RescoreJob.objects.exists()  # nothing is called before the confirm
    sent = []
    monkeypatch.setattr(rescore_jobs.judge_rescore, "apply_async", lambda args: sent.append(args))
    response = client_user.post(
        reverse("training:run-rescore-judge", args=[run.pk]),
        {"version": "1", "reward": "LMAsJudge", "judge_model": "fake/judge", "criteria": "x"},
        **HTMX,
    )
    job = response.context["rescore_job"]
    assert sent == [[job.pk]] and job.status == RescoreJob.QUEUED
    assert job.judge_calls == forecast["calls"]
    assert 'id="rescore-job" data-status="queued"' in response.content.decode()
    # The worker's task (executed here): the judge scores the stored predictions.
    assert rescore_jobs.judge_rescore.apply(args=[job.pk]).get() == RescoreJob.DONE
    job.refresh_from_db()
    assert job.result["candidates"] and job.result["phases"]
    page = client_user.get(reverse("training:run-rescore-job", args=[run.pk, job.pk]), **HTMX)
    assert 'id="rescore-candidates"' in page.content.decode()
    assert LMCallTrace.objects.count() == traces  # the judge only: no program prediction


def test_the_per_run_bound_is_defined_once_and_stops_storing(db, user, demo_dataset):
    program = make_program(user, demo_dataset)
    run = Run.objects.create(
        owner=user, program=program, dataset=demo_dataset, config={}, status=Run.SUCCEEDED
    )
    bound = candidate_predictions.MAX_CANDIDATES_WITH_PREDICTIONS
    Candidate.objects.bulk_create(
        Candidate(
            run=run,
            variable="v",
            candidate_id=f"c{i}",
            operation="seed",
            value={},
            status="scored",
            example_predictions=[{"team": "bug"}],
        )
        for i in range(bound)
    )
    assert candidate_predictions.room_for(run.pk, "c0")  # already keeps them
    assert not candidate_predictions.room_for(run.pk, "one-more")


def test_seeded_candidates_go_through_the_workers_write(db, user):
    from .helpers_eval_table import (
        crafted_predictions,
        routing_dataset,
        seeded_run,
        validation_teams,
    )

    dataset = routing_dataset(user, test=12, train=10)
    probe = seeded_run(user, dataset, *crafted_predictions(12))
    truth = validation_teams(probe)
    assert len(truth) == 2
    wrong = [t for t in ("money", "bug", "box") if t != truth[1]][0]
    run = seeded_run(
        user, dataset, *crafted_predictions(12), candidates={"c1": truth, "c2": [truth[0], wrong]}
    )
    rows = {c.candidate_id: c for c in Candidate.objects.filter(run=run)}
    assert rows["c1"].reward == 1.0 and rows["c2"].reward == 0.5
    assert rows["c2"].example_predictions == [{"team": truth[0]}, {"team": wrong}]
