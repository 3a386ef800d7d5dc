"""Label sets end to end on the Django side: the dataset page shows each label's counts per
split and proposes the label set, the owner declares it or keeps free text, a stratified
split keeps each label's share, and "New program from this dataset" builds a program whose
output field takes exactly the labels; the program page shows every setting."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from django.urls import reverse

from datasets import labels
from datasets.ingest.splitting import count_test_rows, stratified_split_mask
from datasets.models import DatasetRow
from tests.training.conftest import run_config
from training.models import Program, Run
from training.programs import programs as program_services
from training.programs.programs import output_field_names

pytestmark = pytest.mark.django_db
TEAMS = ["box", "bug", "money"]


def _counts(dataset, split):
    return Counter(row.data["team"] for row in dataset.rows.filter(split=split))


def test_a_few_valued_target_is_proposed_with_its_distribution(demo_dataset):
    (profile,) = labels.profiles(demo_dataset)
    assert profile.name == "team" and profile.state == "proposed" and profile.values == TEAMS
    train, test = _counts(demo_dataset, "train"), _counts(demo_dataset, "test")
    assert {value: (a, b) for value, a, b in profile.rows} == {
        team: (train[team], test[team]) for team in TEAMS
    }
    assert labels.label_sets(demo_dataset) == {"team": TEAMS}


def test_free_text_is_not_proposed():
    assert labels.looks_like_label(["a", "b"], 4) is False  # fewer than 3 rows per value
    assert labels.looks_like_label(["yes", "no"], 6) is True
    assert labels.looks_like_label(["a sentence far too long to be any kind of label"], 99) is False


def test_dataset_page_shows_distribution_and_new_program_link(client_user, demo_dataset):
    html = client_user.get(reverse("datasets:detail", args=[demo_dataset.pk])).content.decode()
    assert 'id="labels-team"' in html and "label set (proposed)" in html
    for team in TEAMS:
        assert f"<code>{team}</code>" in html
    assert f'/programs/new/?dataset={demo_dataset.pk}"' in html


def test_owner_declares_or_keeps_free_text(client_user, demo_dataset, other_user, client):
    url = reverse("datasets:label-set", args=[demo_dataset.pk])
    client_user.post(url, {"field": "team", "declare": "0"})
    demo_dataset.refresh_from_db()
    assert labels.profiles(demo_dataset)[0].state == "free"
    assert labels.label_sets(demo_dataset) == {}
    client_user.post(url, {"field": "team", "declare": "1"})
    demo_dataset.refresh_from_db()
    assert demo_dataset.target_fields[0]["choices"] == TEAMS
    assert "choices" not in demo_dataset.target_schema_fields()[0]  # ground truth stays str
    client.force_login(other_user)
    assert client.post(url, {"field": "team", "declare": "0"}).status_code == 404


def test_new_program_from_the_dataset_answers_only_its_labels(client_user, demo_dataset):
    page = client_user.get(reverse("training:program-create") + f"?dataset={demo_dataset.pk}")
    html = page.content.decode()
    assert 'name="use_label_set"' in html and "team: box, bug, money" in html
    form = page.context["form"]
    assert form.initial["dataset"] == str(demo_dataset.pk) and form["use_label_set"].value()
    data = {
        "name": "Labelled",
        "dataset": demo_dataset.pk,
        "module": "Generator",
        "model": "fake/fewshot",
        "temperature": "0",
        "max_tokens": "16",
    }
    client_user.post(reverse("training:program-create"), {**data, "use_label_set": "on"})
    client_user.post(reverse("training:program-create"), {**data, "name": "Free"})
    labelled = Program.objects.get(name="Labelled")
    free = Program.objects.get(name="Free")
    output = program_services.program_from_json(labelled.engine_json).outputs[0].data_model
    assert output.get_schema()["properties"]["team"]["enum"] == TEAMS
    free_output = program_services.program_from_json(free.engine_json).outputs[0].data_model
    assert "enum" not in free_output.get_schema()["properties"]["team"]
    assert output_field_names(program_services.program_from_json(labelled.engine_json)) == ["team"]
    # the program page: every setting, label set shown, input named after its data model
    html = client_user.get(labelled.get_absolute_url()).content.decode()
    assert "<dt>Max tokens</dt><dd>16</dd>" in html
    assert "<dt>Temperature</dt><dd>0</dd>" in html
    assert "<dt>API base</dt><dd>the provider&#x27;s default</dd>" in html
    assert "label set: " in html and '<code class="label-choice">money</code>' in html
    assert "LabelledInput (Input)" in html and "input_" not in html


def test_stratified_split_keeps_each_labels_share():
    values = ["a"] * 60 + ["b"] * 30 + ["c"] * 10
    mask = stratified_split_mask(values, 0.2, seed=7)
    assert mask.sum() == count_test_rows(100, 0.2) == 20
    test = Counter(np.array(values)[mask])
    assert test == {"a": 12, "b": 6, "c": 2}
    assert (stratified_split_mask(values, 0.2, seed=7) == mask).all()
    assert not (stratified_split_mask(values, 0.2, seed=8) == mask).all()


def test_stratify_re_splits_the_dataset_and_is_refused_once_runs_use_it(
    client_user, demo_dataset, program, user
):
    response = client_user.post(
        reverse("datasets:stratify", args=[demo_dataset.pk]), {"field": "team"}
    )
    assert response.status_code == 302
    demo_dataset.refresh_from_db()
    assert demo_dataset.stratify_by == "team"
    total = Counter(row.data["team"] for row in demo_dataset.rows.all())
    test = _counts(demo_dataset, DatasetRow.TEST)
    assert sum(test.values()) == demo_dataset.test_count
    for team in TEAMS:
        assert abs(test[team] - total[team] * demo_dataset.test_ratio) < 1
    Run.objects.create(owner=user, program=program, dataset=demo_dataset, config=run_config())
    client_user.post(reverse("datasets:stratify", args=[demo_dataset.pk]), {"field": "team"})
    html = client_user.get(reverse("datasets:detail", args=[demo_dataset.pk])).content.decode()
    assert "1 run uses this dataset&#x27;s split" in html
