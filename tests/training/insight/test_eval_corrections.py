"""Correcting any example where the per-example table shows it: each row's
prediction before and after training marked right or wrong, or the row given its right answer
(a label field offers the label set); saved at once, undoable, counted above the table, and
published as the next version of the same dataset; the examples a "judge by people" run's
marks scored; a finished run re-scored on the next version from its stored predictions. Only
the run's owner may do it."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from datasets import versions
from datasets.models import Dataset, DatasetChange, DatasetRow
from training.insight.eval_table import ROWS_PER_PAGE
from training.insight.example_rows.validation_rows import scoring_rows
from training.models import Candidate, EvaluationExample, LMCallTrace, RescoreJob, Run

from .helpers_eval_table import (
    LABELS,
    crafted_predictions,
    crafted_run,
    routing_dataset,
    seed_candidates,
    seeded_run,
    validation_teams,
)

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HTTP_HX_REQUEST": "true"}
TRAIN_ROWS = 4  # routing_dataset: the test examples' rows come after the train rows


def act(client, run, index, action, split=None, **answer):
    url = reverse("training:eval-correction", args=[run.pk, index])
    data = {"action": action, **{f"answer_{k}": v for k, v in answer.items()}}
    if split:
        data["split"] = split
    return client.post(url, data, **HTMX)


def pending_count(client, run) -> int:
    html = client.get(reverse("training:eval-pending", args=[run.pk]), **HTMX).content.decode()
    return int(re.search(r'id="eval-pending" data-count="(\d+)"', html).group(1))


def test_every_shown_row_can_be_marked_before_and_after_with_the_label_set(client_user, user):
    run = crafted_run(user, size=30)
    html = client_user.get(reverse("training:eval-table", args=[run.pk]), **HTMX).content.decode()
    cells = re.findall(r'<div class="eval-correction" id="eval-correction-(\d+)"', html)
    assert [int(i) for i in cells] == list(range(ROWS_PER_PAGE))
    # Example 1 failed before training: only its prediction after can be marked.
    one = re.search(r'id="eval-correction-1".*?</form>', html, re.S).group(0)
    assert 'value="right:before"' not in one and 'value="wrong:after"' in one
    three = re.search(r'id="eval-correction-3".*?</form>', html, re.S).group(0)
    assert 'value="wrong:before"' in three and 'value="wrong:after"' in three
    options = re.findall(r'<option value="([^"]+)">', three)
    assert sorted(options) == sorted(LABELS)


def test_wrong_with_the_rows_own_label_is_a_mark_saved_at_once_counted_and_undone(
    client_user, user
):
    run = crafted_run(user, size=12)  # example 3: expected "money", after training "bug"
    response = act(client_user, run, 3, "wrong:after", team="money")
    body = response.content.decode()
    assert response.status_code == 200 and "correction-error" not in body
    assert response["HX-Trigger"] == "corrections-changed"
    assert 'data-phase="after" data-mark="wrong"' in body
    (change,) = versions.pending(user, run.dataset)
    assert (change.kind, change.row_index, change.predicted) == (
        "wrong",
        TRAIN_ROWS + 3,
        {"team": "bug"},
    )
    assert pending_count(client_user, run) == 1
    # The same label typed as "the right answer" marks the prediction, it is not refused.
    response = act(client_user, run, 6, "answer", team="money")
    assert "correction-error" not in response.content.decode()
    assert versions.pending(user, run.dataset).get(row_index=TRAIN_ROWS + 6).kind == "wrong"
    assert pending_count(client_user, run) == 2
    body = act(client_user, run, 3, "undo:after").content.decode()
    assert 'data-mark="wrong"' not in body and pending_count(client_user, run) == 1


def test_marks_before_and_after_and_an_answer_become_the_next_version(client_user, user):
    run = crafted_run(user, size=12)
    dataset = run.dataset
    assert act(client_user, run, 3, "right:before").status_code == 200
    assert act(client_user, run, 3, "wrong:after").status_code == 200
    assert act(client_user, run, 4, "wrong:after", team="box").status_code == 200
    kinds = sorted(versions.pending(user, dataset).values_list("row_index", "kind"))
    row3, row4 = TRAIN_ROWS + 3, TRAIN_ROWS + 4
    assert kinds == [(row3, "right"), (row3, "wrong"), (row4, "answer"), (row4, "wrong")]
    assert pending_count(client_user, run) == 4
    response = client_user.post(reverse("datasets:publish-version", args=[dataset.pk]))
    version = Dataset.objects.get(parent=dataset)
    assert response.status_code == 302
    assert (version.name, version.version, version.root_id) == (dataset.name, 2, dataset.pk)
    assert DatasetRow.objects.get(dataset=version, index=row4).data["team"] == "box"
    assert DatasetRow.objects.get(dataset=dataset, index=row4).data["team"] == "bug"
    marks = sorted((m["row"], m["predicted"]["team"], m["reward"]) for m in version.marks)
    assert marks == [(row3, "bug", 0.0), (row3, "money", 1.0), (row4, "bug", 0.0)]
    # The mark on the answered row is judged against the row's new answer.
    assert next(m for m in version.marks if m["row"] == row4)["expected"] == {"team": "box"}
    log = sorted(version.changes.values_list("row_index", "kind", "author__username"))
    assert [(r, k) for r, k, _ in log] == [
        (row3, "right"),
        (row3, "wrong"),
        (row4, "answer"),
        (row4, "wrong"),
    ]
    assert {a for _, _, a in log} == {user.username}
    assert pending_count(client_user, run) == 0


def run_with_validation_rows(user):
    """A finished run on 12 training rows whose seed was wrong on its first validation row
    and whose best candidate is right on every one (both stored as the worker stores them)."""
    run = seeded_run(user, routing_dataset(user, test=12, train=12), *crafted_predictions(12))
    truth = validation_teams(run)
    wrong = next(label for label in LABELS if label != truth[0])
    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING)  # as the worker stores them
    seed_candidates(run, {"c1": [wrong, *truth[1:]], "c2": list(truth)})
    Candidate.objects.filter(run=run, candidate_id="c2").update(status="best")
    Run.objects.filter(pk=run.pk).update(status=Run.SUCCEEDED)
    run.refresh_from_db()
    return run, truth, wrong


def test_validation_rows_are_shown_and_corrected_like_test_rows(client_user, user):
    run, truth, wrong = run_with_validation_rows(user)
    url = reverse("training:eval-table", args=[run.pk])
    html = client_user.get(url + "?split=validation", **HTMX).content.decode()
    assert 'data-split="validation"' in html and 'id="eval-split-note"' in html
    cells = re.findall(r'id="eval-correction-validation-(\d+)"', html)
    assert [int(i) for i in cells] == list(range(len(truth)))
    assert 'id="eval-correction-0"' not in html  # the test rows' cells are the other split's
    first = re.search(
        r'<tr class="eval-row[^"]*" data-index="0" data-split="validation".*?</tr>', html, re.S
    ).group(0)
    assert 'data-state="improved"' in first and wrong in first and truth[0] in first
    assert "?split=validation&amp;example=0" in first  # its calls: the validation example's
    cell = re.search(r'id="eval-correction-validation-0".*?</form>', html, re.S).group(0)
    assert 'value="wrong:before"' in cell and 'value="right:after"' in cell
    assert 'name="split" value="validation"' in cell
    assert sorted(re.findall(r'<option value="([^"]+)">', cell)) == sorted(LABELS)
    # Filters keep the split: the state links and the form.
    assert "?split=validation&amp;state=improved" in html
    assert 'name="split" value="validation"' in html.split('id="eval-filters"')[1]

    # A mark on the seed's wrong prediction: saved at once on the validation row's dataset
    # row, counted, undone; an answer too.
    dataset_row = scoring_rows(run)[0][0]
    response = act(client_user, run, 0, "wrong:before", split="validation")
    body = response.content.decode()
    assert response.status_code == 200 and "correction-error" not in body
    assert response["HX-Trigger"] == "corrections-changed"
    assert 'id="eval-correction-validation-0"' in body and 'data-mark="wrong"' in body
    (change,) = versions.pending(user, run.dataset)
    assert (change.row_index, change.split, change.kind) == (dataset_row, "train", "wrong")
    assert (change.predicted, change.before) == ({"team": wrong}, {"team": truth[0]})
    assert pending_count(client_user, run) == 1
    act(client_user, run, 0, "undo:before", split="validation")
    assert pending_count(client_user, run) == 0
    act(client_user, run, 1, "answer", split="validation", team=wrong)
    (answer,) = versions.pending(user, run.dataset)
    assert (answer.row_index, answer.after) == (scoring_rows(run)[1][0], {"team": wrong})
    # Published, the next version changes that training row: the test rows are untouched.
    version = versions.publish(user, run.dataset)
    row = DatasetRow.objects.get(dataset=version, index=answer.row_index)
    assert (row.split, row.data["team"]) == ("train", wrong)
    assert client_user.get(url + "?split=nope", **HTMX).context["table_filters"].problems


def test_a_mark_on_a_failed_prediction_or_an_unknown_action_is_said_on_the_row(client_user, user):
    run = crafted_run(user, size=12)  # example 1 failed before training
    body = act(client_user, run, 1, "right:before").content.decode()
    assert "correction-error" in body and "no prediction before training" in body
    assert "correction-error" in act(client_user, run, 2, "delete:all").content.decode()
    assert "correction-error" in act(client_user, run, 2, "answer", team="").content.decode()
    assert not DatasetChange.objects.exists()
    assert act(client_user, run, 99, "right:after").status_code == 404


def test_a_run_judged_by_people_counts_and_lists_the_examples_people_judged(client_user, user):
    first = crafted_run(user, size=12)
    act(client_user, first, 3, "wrong:after")  # "bug" for "money", on example 3 only
    act(client_user, first, 0, "right:before")  # "box" for "money" counts as right
    version = versions.publish(user, first.dataset)
    run = seeded_run(user, version, *crafted_predictions(12), reward_human_marks=True)
    assert run.config["reward"]["judge_by_people"] is True
    html = client_user.get(reverse("training:eval-table", args=[run.pk]), **HTMX).content.decode()
    assert 'id="eval-judged" data-examples="2"' in html
    assert "(2 predictions)" in html and "2 marks in" in html
    judged = client_user.get(
        reverse("training:eval-table", args=[run.pk]) + "?judged=1", **HTMX
    ).content.decode()
    assert re.findall(r'<tr class="eval-row[^"]*" data-index="(\d+)"', judged) == ["0", "3"]
    assert judged.count('class="judged-badge"') == 2
    zero = re.search(r'data-index="0".*?</tr>', judged, re.S).group(0)
    assert 'data-judged="1.0"' in re.search(r"eval-before.*?</td>", zero, re.S).group(0)
    three = re.search(r'data-index="3".*?</tr>', judged, re.S).group(0)
    assert 'data-judged="0.0"' in re.search(r"eval-after.*?</td>", three, re.S).group(0)
    # Example 6 predicted the same "bug" for "money", but the mark was on example 3 only.
    csv = client_user.get(reverse("training:eval-table-csv", args=[run.pk])).content.decode()
    lines = csv.splitlines()
    assert lines[0].endswith(",judged_by_people")
    assert lines[1].endswith(",before:1") and lines[4].endswith(",after:0")
    assert lines[7].endswith(",")
    # A run that does not judge by people says nothing of it.
    plain = seeded_run(user, version, *crafted_predictions(12))
    html = client_user.get(reverse("training:eval-table", args=[plain.pk]), **HTMX).content.decode()
    assert 'id="eval-judged"' not in html and "judged-badge" not in html


def test_only_the_owner_corrects_a_runs_examples(client, user, other_user):
    run = crafted_run(user, size=12)
    client.force_login(other_user)
    assert act(client, run, 3, "wrong:after").status_code == 404
    assert client.get(reverse("training:eval-pending", args=[run.pk]), **HTMX).status_code == 404
    assert not DatasetChange.objects.exists()


def rescored(client, run, number):
    url = reverse("training:run-rescore", args=[run.pk]) + f"?version={number}"
    response = client.get(url, **HTMX)
    assert response.status_code == 200
    return response.context


def test_a_finished_run_is_rescored_on_the_next_version_from_its_stored_predictions(
    client_user, user
):
    run = crafted_run(user, size=12)  # both phases 0.75; example 3: "money" → "bug"
    stored = list(EvaluationExample.objects.order_by("pk").values_list("reward", flat=True))
    act(client_user, run, 3, "answer", team="bug")  # its right answer was "bug" after all
    act(client_user, run, 6, "right:after")  # "bug" for "money" is fine on example 6
    version = versions.publish(user, run.dataset)
    phases = {p["phase"]: p for p in rescored(client_user, run, 2)["rescored"]["phases"]}
    assert (phases["before"]["old"], phases["before"]["new"]) == (0.75, 8 / 12)
    assert (phases["after"]["old"], phases["after"]["new"]) == (0.75, 10 / 12)
    assert [c["index"] for c in phases["after"]["changed"]] == [3]  # marks: not this reward
    assert [c["index"] for c in phases["before"]["changed"]] == [3]
    # Nothing stored changed, and nothing called a model: no trace, no usage.
    assert list(EvaluationExample.objects.order_by("pk").values_list("reward", flat=True)) == stored
    assert not LMCallTrace.objects.exists()
    run.refresh_from_db()
    assert run.lm_calls == 0 and run.final_reward == 0.75
    # A run judged by people takes the version's marks too.
    judged = seeded_run(user, run.dataset, *crafted_predictions(12), reward_human_marks=True)
    phases = {p["phase"]: p for p in rescored(client_user, judged, 2)["rescored"]["phases"]}
    assert phases["after"]["new"] == 11 / 12
    assert sorted(c["index"] for c in phases["after"]["changed"]) == [3, 6]
    html = client_user.get(
        reverse("training:run-rescore", args=[run.pk]) + "?version=2", **HTMX
    ).content.decode()
    assert 'id="rescore-table" data-version="2"' in html and version.label in html
    # A judge calls its model: only its forecast and a confirm, nothing scored or sent yet;
    # an unknown version is said too.
    judge = {"name": "LMAsJudge", "language_model": "fake/judge", "criteria": "the team"}
    Run.objects.filter(pk=run.pk).update(config={**run.config, "reward": judge})
    forecast = rescored(client_user, run, 2)["judge_forecast"]
    assert forecast["calls"] == 22 and forecast["spec"] == judge  # 11 + 11 stored predictions
    assert not RescoreJob.objects.exists()
    assert "no other version 9" in rescored(client_user, run, 9)["rescore_error"]
