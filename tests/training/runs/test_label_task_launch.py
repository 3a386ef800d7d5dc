"""A program that answers a label set is launched, by default, with the optimizer the registry
recommends for label tasks (CalibratedLabels, one epoch), and its run decides the labels from
their scores: the trained program holds its decision, shown on the candidate's page; the
launch form's forecast says what the splits can tell.

``fake/scores`` scores the demo's teams like a biased small model (``bug`` far ahead, the
team whose words the message holds nudged up): its first pick is ``bug`` for every message,
and a bias per label learned from the training rows turns it right."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.training.conftest import make_run, run_config
from tests.training.test_views import launch_data
from training.execution import attempt as execution
from training.models import Candidate, Run
from training.programs.demo import ensure_demo_program

from .test_nearest_few_shot_runs import field_tag


@pytest.mark.django_db
def test_a_label_program_opens_the_launch_form_on_calibrated_labels_for_one_epoch(
    client_user, user, program
):
    demo = ensure_demo_program(user, model="fake/scores")
    html = client_user.get(reverse("training:run-create") + f"?program={demo.pk}").content
    html = html.decode()
    assert '<option value="CalibratedLabels" selected>CalibratedLabels</option>' in html
    assert 'value="1"' in field_tag(html, "epochs")
    assert ">Quick try: CalibratedLabels, 1 epoch</a>" in html
    # a program answering free text starts where it always did
    html = client_user.get(reverse("training:run-create") + f"?program={program.pk}").content
    assert b'<option value="RandomFewShot" selected>RandomFewShot</option>' in html


@pytest.mark.django_db(transaction=True)
def test_a_calibrated_run_decides_the_labels_and_shows_how(client_user, user):
    demo = ensure_demo_program(user, model="fake/scores")
    config = run_config(
        model="fake/scores",
        optimizer="CalibratedLabels",
        cal_embedding_model="fake/embedding",
        epochs=1,
        evaluations_before=1,
        evaluations_after=1,
    )
    run = make_run(user, demo, demo.dataset, config)
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    assert run.baseline_reward < 0.5 and run.final_reward > run.baseline_reward
    best = Candidate.objects.get(run=run, status="best")
    decision = best.value["decision"]
    assert decision["field"] == "team" and set(decision["bias"]) == {"box", "bug", "money"}
    page = client_user.get(best.get_absolute_url()).content.decode()
    assert 'id="candidate-decision"' in page and "How the label is decided" in page
    assert re.search(r'<table class="compact" id="decision-bias">.*<code>bug</code>', page, re.S)
    assert "decision:" in page  # the diff against the seed shows what was learnt
    data = launch_data(demo, demo.dataset, optimizer="CalibratedLabels")
    forecast = client_user.get(reverse("training:run-forecast"), data).content.decode()
    assert 'id="forecast-tells"' in forecast
    assert f"the {demo.dataset.test_count} test rows a change of about ±" in forecast
