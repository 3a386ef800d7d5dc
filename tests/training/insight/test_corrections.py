"""Correcting the data: per-row corrections on a run's sample answers, publishing them as a
new dataset version (the original untouched), "judge by people" on the new version, escaping,
and owner-only access. Runs execute in-process on the scripted fake LM."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from datasets import versions
from datasets.models import Dataset, DatasetChange, DatasetRow
from datasets.services import delete_dataset, get_split
from tests.training.conftest import run_config
from training.execution import attempt as execution
from training.models import Evaluation, Run

pytestmark = pytest.mark.django_db(transaction=True)

MARKUP = "<img src=x onerror=alert(1)>box"


def finished_run(user, program, dataset, **overrides):
    run = Run.objects.create(
        owner=user,
        program=program,
        dataset=dataset,
        config=run_config(evaluations_before=1, evaluations_after=1, epochs=1, **overrides),
    )
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    return run


def panel(client, run):
    response = client.get(reverse("training:run-corrections", args=[run.pk]))
    assert response.status_code == 200
    return response


def correct(client, dataset, row, **data):
    url = reverse("datasets:correct-row", args=[dataset.pk, row])
    return client.post(url, data, HTTP_HX_REQUEST="true")


def mark_three(client, run):
    """Right on a wrong prediction, wrong on a prediction, the right answer typed (with
    markup) on a third: through the endpoint, as the panel's buttons post it."""
    items = panel(client, run).context["items"]
    assert len(items) == 5
    chosen = items[:3]
    for item, kind in zip(chosen, ("right", "wrong", "answer"), strict=True):
        data = {"kind": kind, "predicted": item["predicted_json"], "run": run.pk}
        if kind == "answer":
            data["answer_team"] = MARKUP
        response = correct(client, run.dataset, item["row_index"], **data)
        assert response.status_code == 200 and "correction-error" not in response.content.decode()
    return chosen


def test_three_marks_become_a_new_version_and_the_original_stays(
    client_user, user, program, demo_dataset
):
    run = finished_run(user, program, demo_dataset)
    chosen = mark_three(client_user, run)
    rows = [item["row_index"] for item in chosen]
    assert versions.pending(user, demo_dataset).count() == 3
    before = {r.index: r.data for r in DatasetRow.objects.filter(dataset=demo_dataset)}
    response = client_user.post(reverse("datasets:publish-version", args=[demo_dataset.pk]))
    version = Dataset.objects.get(parent=demo_dataset)
    assert response.status_code == 302 and response["Location"] == f"/datasets/{version.pk}/"
    assert (version.version, version.root_id, version.row_count) == (
        2,
        demo_dataset.pk,
        demo_dataset.row_count,
    )
    assert version.name == demo_dataset.name and version.label == f"{demo_dataset.name} v2"
    assert version.builtin_key == ""
    changes = list(version.changes.order_by("row_index"))
    assert [(c.row_index, c.kind, c.author) for c in changes] == sorted(
        zip(rows, ("right", "wrong", "answer"), [user] * 3, strict=True)
    )
    # The original is as it was; the copy has the typed answer; runs keep their version.
    assert {r.index: r.data for r in DatasetRow.objects.filter(dataset=demo_dataset)} == before
    assert DatasetRow.objects.get(dataset=version, index=rows[2]).data["team"] == MARKUP
    assert Run.objects.get(pk=run.pk).dataset_id == demo_dataset.pk
    assert [m["reward"] for m in sorted(version.marks, key=lambda m: m["row"])] == [
        1.0 if m["row"] == rows[0] else 0.0 for m in sorted(version.marks, key=lambda m: m["row"])
    ]
    assert {m["row"] for m in version.marks} == set(rows[:2])
    assert versions.pending(user, demo_dataset).count() == 0
    # Both dataset pages list the versions with who changed what; markup stays text.
    page = client_user.get(reverse("datasets:detail", args=[version.pk])).content.decode()
    assert page.count('class="change-author">alice<') == 3
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;box" in page
    original = client_user.get(reverse("datasets:detail", args=[demo_dataset.pk]))
    assert [v.version for v in original.context["versions"]] == [1, 2]
    # The run page's panel shows the typed answer as text too (pending on another row).
    correct(client_user, demo_dataset, rows[0], kind="answer", answer_team="<b>x</b>")
    html = panel(client_user, run).content.decode()
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html


def test_a_run_on_the_new_version_uses_the_corrections(client_user, user, program, demo_dataset):
    run = finished_run(user, program, demo_dataset)
    items = panel(client_user, run).context["items"]
    test_rows = list(
        DatasetRow.objects.filter(dataset=demo_dataset, split="test")
        .order_by("index")
        .values_list("index", flat=True)
    )
    (after,) = Evaluation.objects.filter(run=run, phase="after")
    wrong = [
        i
        for i, item in enumerate(items)
        if item["sample"]["predicted"] != item["sample"]["expected"]
    ]
    right = [
        i
        for i, item in enumerate(items)
        if item["sample"]["predicted"] == item["sample"]["expected"]
    ]
    assert len(wrong) >= 2 and right, "the fake's answers are partly right"
    plan = {wrong[0]: "right", right[0]: "wrong", wrong[1]: "answer"}
    for index, kind in plan.items():
        item = items[index]
        data = {"kind": kind, "predicted": item["predicted_json"], "run": run.pk}
        if kind == "answer":  # the prediction was the right answer after all
            data["answer_team"] = item["sample"]["predicted"]["team"]
        correct(client_user, demo_dataset, item["row_index"], **data)
    version = versions.publish(user, demo_dataset)
    # Judge by people is refused on a version without marks (v1, pinned), accepted on the
    # new one (the latest, which the form takes when no version is pinned).
    assert "reward_human_marks" in _launch_errors(client_user, program, demo_dataset, pinned=1)
    assert "reward_human_marks" not in _launch_errors(client_user, program, demo_dataset)
    branch = Run.objects.create(
        owner=user,
        program=program,
        dataset=version,
        config=run_config(
            evaluations_before=1, evaluations_after=1, epochs=1, reward_human_marks=True
        ),
    )
    assert branch.config["reward"]["judge_by_people"] is True
    assert execution.execute(branch.pk, branch.attempt) == Run.SUCCEEDED
    (corrected,) = Evaluation.objects.filter(run=branch, phase="after")
    for index, kind in plan.items():
        position = test_rows.index(items[index]["row_index"])
        assert after.example_rewards[position] == (0.0 if kind != "wrong" else 1.0)
        assert corrected.example_rewards[position] == (0.0 if kind == "wrong" else 1.0)
    # Unmarked examples scored as before (same seed, same training rows).
    untouched = [
        p
        for p in range(len(test_rows))
        if p not in {test_rows.index(items[i]["row_index"]) for i in plan}
    ]
    assert [corrected.example_rewards[p] for p in untouched] == [
        after.example_rewards[p] for p in untouched
    ]
    # The typed answer is the new version's data: exactly that test row changed.
    old, new = get_split(demo_dataset, "test")[1], get_split(version, "test")[1]
    changed = [p for p in range(len(old)) if old[p] != new[p]]
    answered = items[wrong[1]]
    assert changed == [test_rows.index(answered["row_index"])]
    assert new[changed[0]] == answered["sample"]["predicted"]


def _launch_errors(client, program, dataset, pinned=None):
    data = {
        "program": program.pk,
        "dataset": dataset.pk,
        **({"dataset_version": pinned} if pinned else {}),
        "reward": "ExactMatch",
        "optimizer": "RandomFewShot",
        "epochs": 1,
        "batch_size": 8,
        "validation_split": 0.25,
        "reward_human_marks": "on",
        "evaluations_before": 0,
        "evaluations_after": 1,
    }
    response = client.post(reverse("training:run-create"), data)
    if response.status_code == 302:
        Run.objects.filter(pk=int(response["Location"].strip("/").split("/")[-1])).delete()
        return {}
    return response.context["form"].errors


def test_a_new_run_uses_the_latest_version_or_the_pinned_one_and_says_which(
    client_user, user, program, demo_dataset
):
    run = finished_run(user, program, demo_dataset)
    row = panel(client_user, run).context["items"][0]
    correct(
        client_user, demo_dataset, row["row_index"], kind="wrong", predicted=row["predicted_json"]
    )
    version = versions.publish(user, demo_dataset)
    base = {
        "program": program.pk,
        "dataset": demo_dataset.pk,  # the program's dataset: v1
        "reward": "ExactMatch",
        "optimizer": "RandomFewShot",
        "epochs": 1,
        "batch_size": 8,
        "evaluations_before": 0,
        "evaluations_after": 1,
    }
    form = client_user.get(reverse("training:run-create") + f"?program={program.pk}")
    html = form.content.decode()
    dataset_select = re.search(r'<select name="dataset".*?</select>', html, re.S).group(0)
    assert (
        f'<option value="{version.pk}" selected>{demo_dataset.name} (v2, latest)</option>'
        in dataset_select
    )
    assert f'<option value="{demo_dataset.pk}"' not in dataset_select  # one entry per dataset
    launched = []
    for pinned in (None, 1):
        data = {**base, **({"dataset_version": pinned} if pinned else {})}
        response = client_user.post(reverse("training:run-create"), data)
        assert response.status_code == 302
        launched.append(Run.objects.get(pk=int(response["Location"].strip("/").split("/")[-1])))
    latest, old = launched
    assert (latest.dataset_id, latest.config["dataset_version"]) == (
        version.pk,
        {"number": 2, "pinned": False},
    )
    assert (old.dataset_id, old.config["dataset_version"]) == (
        demo_dataset.pk,
        {"number": 1, "pinned": True},
    )
    page = client_user.get(latest.get_absolute_url()).content.decode()
    assert f"{demo_dataset.name} v2</a>" in page and "(latest at launch)" in page
    assert "(pinned)" in client_user.get(old.get_absolute_url()).content.decode()
    response = client_user.post(reverse("training:run-create"), {**base, "dataset_version": 7})
    assert "has no version 7" in response.context["form"].errors["dataset_version"][0]
    Run.objects.filter(pk__in=[r.pk for r in launched]).update(status=Run.CANCELLED)
    listing = client_user.get(reverse("datasets:list")).content.decode()
    assert listing.count(f">{demo_dataset.name}</a>") == 1 and "(2 versions)" in listing


def test_unusable_corrections_say_why(client_user, user, program, demo_dataset):
    run = finished_run(user, program, demo_dataset)
    row = panel(client_user, run).context["items"][0]["row_index"]
    cases = [
        (10_000, {"kind": "right", "predicted": '{"team": "box"}'}, "has no row 10001"),
        (row, {"kind": "answer", "answer_team": " "}, "type the right answer"),
        (row, {"kind": "right", "predicted": "not json"}, "not JSON"),
        (row, {"kind": "wrong"}, "needs the prediction"),
        (row, {"kind": "delete"}, "Choose one of"),
        (row, {"kind": "answer", "answer_team": "x" * 5001}, "at most 5000"),
    ]
    for index, data, message in cases:
        response = correct(client_user, demo_dataset, index, **data)
        assert message in response.content.decode(), message
    assert versions.pending(user, demo_dataset).count() == 0
    plain = client_user.post(
        reverse("datasets:correct-row", args=[demo_dataset.pk, row]), {"kind": "wrong"}
    )
    assert plain.status_code == 400
    response = client_user.post(reverse("datasets:publish-version", args=[demo_dataset.pk]))
    assert response.status_code == 302 and not Dataset.objects.filter(parent=demo_dataset).exists()


def test_others_cannot_correct_publish_or_see_the_panel(
    client, user, other_user, program, demo_dataset
):
    run = finished_run(user, program, demo_dataset)
    row = DatasetRow.objects.filter(dataset=demo_dataset, split="test").first().index
    client.force_login(other_user)
    assert client.get(reverse("training:run-corrections", args=[run.pk])).status_code == 404
    url = reverse("datasets:correct-row", args=[demo_dataset.pk, row])
    assert client.get(url).status_code == 404
    assert client.post(url, {"kind": "answer", "answer_team": "box"}).status_code == 404
    publish = reverse("datasets:publish-version", args=[demo_dataset.pk])
    assert client.post(publish).status_code == 404
    assert not DatasetChange.objects.exists()
    # Their own dataset, but naming someone else's run as the source: refused.
    from datasets.services import create_demo_dataset

    theirs = create_demo_dataset(other_user)
    with pytest.raises(versions.CorrectionError, match="not one of yours"):
        versions.record(other_user, theirs, row, "right", predicted={"team": "box"}, run_id=run.pk)


def test_deleting_a_version_keeps_the_file_the_others_share(user, program, demo_dataset):
    row = DatasetRow.objects.filter(dataset=demo_dataset).first()
    versions.record(user, demo_dataset, row.index, "answer", answer={"team": "other"})
    version = versions.publish(user, demo_dataset)
    assert version.original_file.name == demo_dataset.original_file.name
    delete_dataset(version)
    assert demo_dataset.original_file.storage.exists(demo_dataset.original_file.name)
    assert DatasetChange.objects.count() == 0  # the change log went with its version
    assert json.loads(json.dumps(versions.human_marks(demo_dataset))) == []
