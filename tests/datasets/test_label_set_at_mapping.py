"""The label set comes at the mapping step: the upload's profile finds a target
column with few distinct values, the mapping step offers and chooses "label set", the schema
table shows it as one, and the default split of a label target is stratified."""

from collections import Counter

import pytest

from datasets.ingest.splitting import split_mask
from datasets.models import Dataset, Upload

from .test_datasets_views import create_from, mapping_post, upload

pytestmark = pytest.mark.django_db

#: tests/datasets/fixtures/emotions.csv: 24 messages, anger 12, joy 8, sadness 4.
SHARES = {"anger": 12, "joy": 8, "sadness": 4}
ROLES = {"text": ("input", "text", "str"), "emotion": ("target", "emotion", "label set")}


def test_the_mapping_step_offers_and_chooses_the_label_set(alice_client):
    upload(alice_client, "emotions.csv")
    pending = Upload.objects.get()
    columns = {column["name"]: column for column in pending.profile["columns"]}
    assert columns["emotion"]["labels"] == sorted(SHARES)
    assert columns["text"]["labels"] is None  # 24 distinct messages: free text
    html = alice_client.get(f"/datasets/uploads/{pending.pk}/").content.decode()
    assert '<option value="label set" selected>label set (3 values)</option>' in html
    assert html.count('<option value="label set"') == 1  # offered where it fits only
    assert "3 distinct values: anger, joy, sadness" in html
    preview = alice_client.post(
        f"/datasets/uploads/{pending.pk}/mapping-preview/", mapping_post(pending, ROLES)
    ).content.decode()
    assert "target · label set: anger, joy, sadness" in preview


def test_a_label_set_target_is_declared_shown_and_split_stratified(alice_client):
    response = create_from(alice_client, "emotions.csv", ROLES, name="Emotions")
    dataset = Dataset.objects.get()
    assert response.status_code == 302
    assert dataset.target_fields == [
        {
            "name": "emotion",
            "type": "str",
            "description": "about emotion",
            "choices": ["anger", "joy", "sadness"],
        }
    ]
    assert dataset.stratify_by == "emotion"
    test = Counter(dataset.rows.filter(split="test").values_list("data__emotion", flat=True))
    # test ratio 0.25: each label keeps its share of the 6 test rows exactly
    assert test == {label: count // 4 for label, count in SHARES.items()}
    plain = split_mask(24, 0.25, 7)  # what the unstratified split would have held out
    labels = list(dataset.rows.order_by("index").values_list("data__emotion", flat=True))
    assert Counter(label for label, held in zip(labels, plain, strict=True) if held) != test
    html = alice_client.get(f"/datasets/{dataset.pk}/").content.decode()
    assert (
        '<td class="field-type">label set: <code>anger</code>, <code>joy</code>, '
        "<code>sadness</code></td>" in html
    )
    assert "stratified by <code>emotion</code>" in html


@pytest.mark.parametrize(
    ("roles", "message"),
    [
        (
            {"text": ("input", "text", "label set"), "emotion": ("target", "emotion", "str")},
            "only a target can be one",
        ),
        (
            {"emotion": ("input", "emotion", "str"), "text": ("target", "text", "label set")},
            "Column &#x27;text&#x27; has no small set of distinct values",
        ),
    ],
)
def test_a_label_set_where_it_cannot_be_is_refused_in_words(alice_client, roles, message):
    response = create_from(alice_client, "emotions.csv", roles)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Dataset.objects.exists()
