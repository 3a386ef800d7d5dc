"""The run page's per-example evaluation table: what a run stores per test example, the
states, filters (state, search, confusion-matrix cell), sorting, pages, the CSV, escaping,
and that only the owner sees any of it."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from datasets.services import get_split
from tests.support.fake_models import XSS_PAYLOAD
from tests.training.conftest import make_program, run_config
from training.execution import attempt as execution
from training.execution.recording import evaluation_examples
from training.insight.eval_table import ROWS_PER_PAGE
from training.models import EvaluationExample, Run

from .helpers_eval_table import LABELS, routing_dataset, seeded_run
from .helpers_eval_table import crafted_run as crafted

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HTTP_HX_REQUEST": "true"}


def executed(user, dataset, model="fake/fewshot"):
    program = make_program(user, dataset, model=model)
    config = run_config(epochs=1, evaluations_before=1, evaluations_after=1, model=model)
    run = Run.objects.create(owner=user, program=program, dataset=dataset, config=config)
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    return run


def table(client, run, query="") -> str:
    url = reverse("training:eval-table", args=[run.pk]) + (f"?{query}" if query else "")
    response = client.get(url, **HTMX)
    assert response.status_code == 200
    return response.content.decode()


def shown_indices(html: str) -> list[int]:
    import re

    return [int(i) for i in re.findall(r'<tr class="eval-row[^"]*" data-index="(\d+)"', html)]


def test_a_run_stores_each_test_examples_prediction_and_reward(client_user, user, demo_dataset):
    run = executed(user, demo_dataset)
    inputs, targets = get_split(demo_dataset, "test")
    for evaluation in run.evaluations.all():
        rows = list(EvaluationExample.objects.filter(evaluation=evaluation))
        assert [row.example_index for row in rows] == list(range(len(inputs)))
        assert [row.reward for row in rows] == evaluation.example_rewards
        for row, target in zip(rows, targets, strict=True):
            assert row.error == ""
            assert row.reward == float(row.prediction == target)
    # before training the few-shot fake has no example to copy: every answer is empty
    before = EvaluationExample.objects.filter(evaluation__run=run, evaluation__phase="before")
    assert {row.prediction["team"] for row in before} == {""}
    page = client_user.get(run.get_absolute_url()).content.decode()
    assert 'id="eval-table"' in page
    improved = EvaluationExample.objects.filter(
        evaluation__run=run, evaluation__phase="after", reward=1.0
    ).count()
    assert improved > 0
    assert f"{improved} improved" in page
    assert len(shown_indices(page)) == len(inputs)


def test_failed_predictions_keep_their_error(client_user, user, demo_dataset):
    run = executed(user, demo_dataset, model="fake/fewshot?failure_rate=0.3&failure=fatal")
    failed = EvaluationExample.objects.filter(evaluation__run=run, prediction__isnull=True)
    assert failed.exists()
    assert all("simulated non-retryable failure" in row.error for row in failed)
    after_failed = failed.filter(evaluation__phase="after").count()
    html = table(client_user, run, "state=failed")
    assert len(shown_indices(html)) == after_failed
    assert "simulated non-retryable failure" in html


def test_states_filter_search_sort_and_pages(client_user, user):
    run = crafted(user)
    assert shown_indices(table(client_user, run, "state=regressed")) == [3, 6]
    assert shown_indices(table(client_user, run, "state=improved")) == [0, 1, 2]
    assert shown_indices(table(client_user, run, "state=failed")) == [9]
    same = shown_indices(table(client_user, run, "state=same"))
    assert len(same) == 30 - 6 and 3 not in same
    # search: inputs, expected and predictions, case-insensitive
    assert shown_indices(table(client_user, run, "q=MESSAGE+12+")) == [12]
    assert shown_indices(table(client_user, run, "q=refusal")) == [1, 9]  # the errors
    # sort: the change after − before (ties in example order); 9 failed after: 1 → 0
    order = shown_indices(table(client_user, run, "sort=-change&page=2"))
    assert order[-3:] == [3, 6, 9]
    assert shown_indices(table(client_user, run, "sort=-change"))[:3] == [0, 1, 2]
    assert shown_indices(table(client_user, run, "sort=change"))[:3] == [3, 6, 9]
    assert shown_indices(table(client_user, run, "sort=-state"))[:2] == [3, 6]
    # pages of ROWS_PER_PAGE
    first = shown_indices(table(client_user, run))
    assert first == list(range(ROWS_PER_PAGE))
    assert shown_indices(table(client_user, run, "page=2")) == list(range(ROWS_PER_PAGE, 30))
    # an unusable value is said, not a 500
    html = table(client_user, run, "state=bogus&sort=nope")
    assert "Ignored: state" in html and "Ignored: sort" in html


def test_confusion_matrix_counts_and_cells_filter_the_table(client_user, user):
    run = crafted(user)
    html = table(client_user, run)
    assert 'data-phase="before"' in html and 'data-phase="after"' in html
    # after training: 3 and 6 (both "money"... no: LABELS[0]) — expected money, predicted bug
    rows = shown_indices(
        table(client_user, run, "matrix=after&field=team&expected=money&predicted=bug")
    )
    assert rows == [3, 6]
    rows = shown_indices(
        table(client_user, run, "matrix=after&field=team&expected=money&predicted=(failed)")
    )
    assert rows == [9]
    rows = shown_indices(
        table(client_user, run, "matrix=before&field=team&expected=money&predicted=box")
    )
    assert rows == [0]
    # the cell's link carries exactly that filter
    assert "matrix=after&amp;field=team&amp;expected=money&amp;predicted=bug" in html


def test_csv_has_every_filtered_row_and_defuses_formulas(client_user, user):
    dataset = routing_dataset(user, test=6)
    before = ["money", "bug", "box", "money", "bug", "box"]
    after = ["=HYPERLINK(1)", "bug", "box", "money", "bug", None]
    run = seeded_run(user, dataset, before, after)
    url = reverse("training:eval-table-csv", args=[run.pk])
    response = client_user.get(url)
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-examples.csv"'
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][0] == "example" and len(rows) == 1 + 6
    assert rows[1][1:4] == ["message 0 about money", "money", "money"]
    assert rows[1][6] == "'=HYPERLINK(1)"  # a spreadsheet shows it, never runs it
    assert rows[6][6] == "" and rows[6][8] == "simulated refusal (HTTP 400)"
    assert [row[-1] for row in rows[1:]] == ["regressed", "same", "same", "same", "same", "failed"]
    regressed = list(
        csv.reader(io.StringIO(client_user.get(f"{url}?state=regressed").content.decode()))
    )
    assert [row[0] for row in regressed[1:]] == ["0"]


def test_predictions_are_escaped_and_bounded(client_user, user):
    dataset = routing_dataset(user, test=6)
    long_text = "x" * (evaluation_examples.MAX_CHARS + 500)
    after = [XSS_PAYLOAD, long_text, "box", "money", "bug", "box"]
    run = seeded_run(user, dataset, list(LABELS) * 2, after)
    stored = EvaluationExample.objects.get(
        evaluation__run=run, evaluation__phase="after", example_index=1
    )
    assert stored.prediction["team"].endswith("… [500 more characters]")
    page = client_user.get(run.get_absolute_url()).content.decode()
    assert XSS_PAYLOAD not in page
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in page


def test_row_links_to_its_traces_and_plain_links_land_on_the_run_page(client_user, user):
    run = crafted(user, size=12)
    html = table(client_user, run)
    trace_url = reverse("training:trace-list", args=[run.pk])
    assert f'href="{trace_url}?split=test&amp;example=4"' in html
    response = client_user.get(reverse("training:eval-table", args=[run.pk]) + "?state=regressed")
    assert response.status_code == 302
    assert response["Location"] == f"{run.get_absolute_url()}?state=regressed#eval-table"
    page = client_user.get(f"{run.get_absolute_url()}?state=regressed").content.decode()
    assert shown_indices(page) == [3, 6]


def test_only_the_owner_sees_the_table(client, user, other_user):
    run = crafted(user, size=12)
    client.force_login(other_user)
    for name in ("training:eval-table", "training:eval-table-csv"):
        assert client.get(reverse(name, args=[run.pk]), **HTMX).status_code == 404
