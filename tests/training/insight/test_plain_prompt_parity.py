"""The run page's plain-prompt export and its parity check: the export downloads, "Check
parity" sends a re-score job to a worker (its task executed here), and the test split scored
from the export alone is shown beside the run's own test score.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.training.conftest import executed_run, make_run, run_config
from tests.training.helpers_programs import make_program
from training.insight import rescore_jobs
from training.models import RescoreJob, Run
from training.programs.demo import ensure_demo_program

HTMX = {"HTTP_HX_REQUEST": "true"}


def check_parity(client, run, monkeypatch) -> RescoreJob:
    """Press "Check parity", then execute the job the worker would have been sent."""
    sent = []
    monkeypatch.setattr(rescore_jobs.parity_rescore, "apply_async", lambda args: sent.append(args))
    asked = client.post(reverse("training:run-parity", args=[run.pk]), **HTMX)
    job = asked.context["parity_job"]
    assert sent == [[job.pk]] and job.status == RescoreJob.QUEUED
    assert 'id="parity-job" data-status="queued"' in asked.content.decode()
    assert rescore_jobs.parity_rescore.apply(args=[job.pk]).get() == RescoreJob.DONE
    job.refresh_from_db()
    return job


@pytest.mark.django_db(transaction=True)
def test_a_few_shot_runs_export_rescores_to_its_own_test_score(
    client_user, user, demo_dataset, monkeypatch
):
    run = executed_run(user, make_program(user, demo_dataset), demo_dataset)
    part = client_user.get(reverse("training:run-plain-prompts", args=[run.pk]), **HTMX)
    html = part.content.decode()
    assert 'id="plain-prompts-download"' in html and 'id="parity-check"' in html
    download = client_user.get(reverse("training:run-plain-prompts-json", args=[run.pk]))
    assert download["Content-Disposition"].endswith(f'"run-{run.pk}-plain-prompts.json"')
    export = json.loads(download.content)
    assert export["format"] == "trainboard-plain-prompts"
    assert export["modules"][0]["messages"][0]["role"] == "system"

    job = check_parity(client_user, run, monkeypatch)
    assert job.result["own_reward"] == run.final_reward
    assert job.result["export_reward"] == run.final_reward
    assert job.result["equal"] is True and job.result["rows_differing"] == 0
    tests = run.dataset.rows.filter(split="test").count()
    assert job.result["text"] == (
        f"export scores {run.final_reward:.4f} on the {tests} test rows; "
        f"the run's own test score {run.final_reward:.4f}: equal"
    )
    polled = client_user.get(reverse("training:run-parity-job", args=[run.pk, job.pk]), **HTMX)
    assert 'id="parity-result" data-equal="yes"' in polled.content.decode()
    # the part shows the latest check when the page is opened again
    again = client_user.get(reverse("training:run-plain-prompts", args=[run.pk]), **HTMX)
    assert ": equal" in again.content.decode()
    assert run.final_reward == Run.objects.get(pk=run.pk).final_reward  # nothing changed


def executed_demo_run(user, model: str, optimizer: str, embedding_model: str) -> Run:
    """The demo program on ``model``, trained one epoch by ``optimizer`` and evaluated after
    (what its export is compared with), executed here by the worker's own code."""
    from training.execution import attempt as execution

    demo = ensure_demo_program(user, model=model)
    config = run_config(
        model=model,
        optimizer=optimizer,
        cal_embedding_model=embedding_model,
        epochs=1,
        evaluations_before=0,
        evaluations_after=1,
    )
    run = make_run(user, demo, demo.dataset, config)
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    return run


@pytest.mark.django_db(transaction=True)
def test_a_calibrated_runs_labels_are_decided_from_the_exported_decision(
    client_user, user, monkeypatch
):
    run = executed_demo_run(user, "fake/scores", "CalibratedLabels", "fake/embedding")
    job = check_parity(client_user, run, monkeypatch)
    assert job.result["export_reward"] == run.final_reward, job.result["text"]
    assert job.result["equal"] is True
    assert any("decided from every label's log-probability" in n for n in job.result["not_plain"])


@pytest.mark.django_db(transaction=True)
def test_another_members_run_and_an_unfinished_run_offer_no_export(
    client, client_user, user, other_user, demo_dataset
):
    run = make_run(user, make_program(user, demo_dataset), demo_dataset)  # queued
    part = client_user.get(reverse("training:run-plain-prompts", args=[run.pk]), **HTMX)
    assert 'id="parity-check"' not in part.content.decode()
    refused = client_user.post(reverse("training:run-parity", args=[run.pk]), **HTMX)
    assert "needs a succeeded run" in refused.content.decode()
    assert not RescoreJob.objects.exists()
    client.force_login(other_user)
    for name in ("training:run-plain-prompts", "training:run-plain-prompts-json"):
        assert client.get(reverse(name, args=[run.pk])).status_code == 404
    assert client.post(reverse("training:run-parity", args=[run.pk])).status_code == 404


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_local_model_runs_export_rescores_to_exactly_its_own_test_score(
    client_user, user, monkeypatch
):
    """The demo program on local/smollm2 (its team a label set, decided from label scores)
    trained by CalibratedLabels, which adds a decision, a read-out and a vote on local/minilm
    embeddings. (A few-shot program's parity on the local model: the engine's
    ``tests/engine/saving/test_plain_prompts_local.py``.)"""
    pytest.importorskip("llama_cpp")
    run = executed_demo_run(user, "local/smollm2", "CalibratedLabels", "local/minilm")
    job = check_parity(client_user, run, monkeypatch)
    print(job.result["text"])
    assert job.result["export_reward"] == run.final_reward
    assert job.result["equal"] is True and job.result["rows_differing"] == 0
    assert job.result["not_reproduced"] == [] and job.result["drift"] == []
