"""Splits that can tell: a small file starts with a test split large enough to tell a change
where the data allows, the split step says what its test split can tell, and the training rows
reach ``fit`` spread by label, so the validation split ``fit`` cuts off their end holds every
label in its share even when the file is sorted by label."""

from collections import Counter

import pytest

from datasets.ingest.splitting import split_note, suggested_test_ratio
from datasets.models import Dataset, Upload
from datasets.services import get_split
from training.forecasting.forecast import validation_cut

from .test_datasets_views import create_from, mapping_post, upload

pytestmark = pytest.mark.django_db

#: tests/datasets/fixtures/emotions_sorted.csv: 120 rows, 40 of each label, sorted by label.
ROLES = {"text": ("input", "text", "str"), "emotion": ("target", "emotion", "label set")}


def test_a_small_file_starts_with_a_test_split_that_can_tell_a_change(alice_client):
    upload(alice_client, "emotions_sorted.csv")
    pending = Upload.objects.get()
    html = alice_client.get(f"/datasets/uploads/{pending.pk}/").content.decode()
    assert suggested_test_ratio(120) == 0.4  # 116 rows would tell ±0.10: 40% is the most
    assert 'name="test_ratio" value="0.4"' in html
    assert suggested_test_ratio(5000) == 0.2
    preview = alice_client.post(
        f"/datasets/uploads/{pending.pk}/mapping-preview/",
        mapping_post(pending, ROLES, test_ratio="0.1"),
    ).content.decode()
    note = split_note(120, 0.1)
    assert note["test_rows"] == 12 and round(note["detectable"], 2) == 0.31
    assert "Split: about 108 training and 12 test rows." in preview
    assert "12 test rows tell a difference of about ±0.31 or more from noise" in preview
    assert "about 116 rows tell ±0.10 — a test ratio of 0.4 gets closer with this file" in preview


def test_a_file_sorted_by_label_still_validates_on_every_label(alice_client):
    create_from(alice_client, "emotions_sorted.csv", ROLES, test_ratio="0.25")
    dataset = Dataset.objects.get()
    _, targets = get_split(dataset, "train")
    cut = validation_cut(len(targets), 0.25)
    validation = Counter(t["emotion"] for t in targets[cut:])
    # 90 training rows, 30 of each label: the last 22 hold each label in its share
    assert sum(validation.values()) == 22
    assert set(validation) == {"anger", "joy", "sadness"}
    assert max(validation.values()) - min(validation.values()) <= 1
    rows = list(dataset.rows.filter(split="train").order_by("index"))
    in_file_order = Counter(row.data["emotion"] for row in rows[cut:])
    assert in_file_order == {"sadness": 22}  # what the file's tail would have been
    assert get_split(dataset, "train") == get_split(dataset, "train")  # one order, seeded
