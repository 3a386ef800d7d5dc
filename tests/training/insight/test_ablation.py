"""Ablation of a part of a finished run's final prompt (``training.insight.ablation`` and its
worker, ``training.execution.ablation``): the forecast is the calls the worker then makes,
the effect is the paired bootstrap against the final candidate on the same examples, a result
is kept (asking again sends no task), a run's cap on calls is kept, others get 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from training.engine.utils.paired_bootstrap import paired_bootstrap
from training.execution import ablation as worker
from training.insight import ablation, provenance
from training.models import Ablation, Run

from .test_candidate_confidence import HTMX, omega

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def in_process(monkeypatch):
    """The ablation task executed here when it is sent (no broker, no worker); counts sends."""
    sent = []

    def apply_async(args, retry=True):
        sent.append(args)
        return worker.ablate.apply(args=args)

    monkeypatch.setattr(worker.ablate, "apply_async", apply_async)
    return sent


def places(run) -> tuple[str, int, int]:
    [entry] = provenance.provenance(run)
    kinds = [p.kind for p in entry["pieces"]]
    return entry["variable"], kinds.index("sentence"), len(kinds)


def test_an_ablation_costs_its_forecast_and_is_kept(in_process, client_user, user, demo_dataset):
    run = omega(user, demo_dataset, epochs=2)
    variable, index, _ = places(run)
    final = provenance.final_candidate(run, variable)
    offer = ablation.forecast(run, variable, index)
    assert offer["split"] == "validation"
    assert offer["rows"] == len(final.example_rewards) == offer["calls"]  # one generator

    url = reverse("training:run-ablation", args=[run.pk])
    asked = client_user.get(url, {"variable": variable, "piece": index, "ask": 1}, **HTMX)
    assert f'<strong class="ablation-forecast-calls">{offer["calls"]}</strong>' in asked.text
    answer = client_user.post(url, {"variable": variable, "piece": index}, **HTMX)
    assert answer.status_code == 200 and len(in_process) == 1
    row = Ablation.objects.get(run=run)
    assert row.status == Ablation.DONE, row.error
    assert row.calls == offer["calls"]
    assert offer["piece"].text not in row.value["instructions"]
    again = paired_bootstrap(final.example_rewards, row.example_rewards)
    assert [row.difference, row.low, row.high] == pytest.approx(
        [again.difference, again.low, again.high]
    )
    assert 'hx-trigger="every 1s"' in answer.text  # answered while queued: the cell polls
    polled = client_user.get(url, {"variable": variable, "piece": index}, **HTMX).text
    assert f"{row.difference:+.3f}" in polled
    assert 'hx-trigger="every' not in polled  # done: the cell stops polling

    # asked again (a click, or the page's GET after a reload): the stored result, no task
    assert ablation.start(run, variable, index).pk == row.pk
    client_user.post(url, {"variable": variable, "piece": index}, **HTMX)
    assert len(in_process) == 1
    section = client_user.get(reverse("training:run-selection", args=[run.pk]), **HTMX).text
    assert f"{row.difference:+.3f}" in section and 'data-status="done"' in section


def test_a_queued_ablation_polls_and_a_dead_one_can_be_asked_again(
    client_user, user, demo_dataset, monkeypatch
):
    monkeypatch.setattr(worker.ablate, "apply_async", lambda args, retry=True: None)
    run = omega(user, demo_dataset, epochs=1)
    variable, index, _ = places(run)
    url = reverse("training:run-ablation", args=[run.pk])
    answer = client_user.post(url, {"variable": variable, "piece": index}, **HTMX)
    assert 'hx-trigger="every 1s"' in answer.text and "ablation-running" in answer.text
    row = Ablation.objects.get(run=run)
    Ablation.objects.filter(pk=row.pk).update(
        status=Ablation.RUNNING, started_at=row.created.replace(year=2000)
    )
    shown = client_user.get(url, {"variable": variable, "piece": index}, **HTMX).text
    assert "The worker did not finish" in shown and "every 1s" not in shown
    assert ablation.start(run, variable, index).status == Ablation.QUEUED


def test_a_cap_on_calls_is_kept(in_process, user, demo_dataset):
    run = omega(user, demo_dataset, epochs=1)
    variable, index, _ = places(run)
    calls = ablation.forecast(run, variable, index)["calls"]
    Run.objects.filter(pk=run.pk).update(
        config={**run.config, "budget_calls": run.lm_calls + calls - 1}
    )
    run.refresh_from_db()
    with pytest.raises(ablation.AblationError, match=f"this ablation needs {calls}"):
        ablation.start(run, variable, index)
    assert not in_process and not Ablation.objects.exists()


def test_without_takes_out_one_sentence_or_one_example():
    example = {"inputs": {"message": "a"}, "outputs": {"team": "money"}}
    value = {"instructions": "Route it. Refunds go to money.\nBe brief.", "examples": [example]}
    sentence = provenance.Piece("sentence", "Refunds go to money.", origin=None, parent=None)
    assert ablation.without(value, sentence)["instructions"] == "Route it.\nBe brief."
    key = provenance._example_key(example)
    assert ablation.without(value, provenance.Piece("example", key, None, None))["examples"] == []
    assert value["examples"] == [example]  # the stored value is left alone


def test_others_get_404_and_an_active_run_is_refused(client, other_user, user, demo_dataset):
    run = omega(user, demo_dataset, epochs=1)
    variable, index, _ = places(run)
    client.force_login(other_user)
    url = reverse("training:run-ablation", args=[run.pk])
    assert client.post(url, {"variable": variable, "piece": index}, **HTMX).status_code == 404
    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING)
    run.refresh_from_db()
    with pytest.raises(ablation.AblationError, match="once the run has succeeded"):
        ablation.forecast(run, variable, index)
    assert not Ablation.objects.exists()
