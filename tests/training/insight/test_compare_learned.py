"""The compare page's side-by-side best candidates: which candidate is shown, what is
marked as different, and that LM-written values stay text."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.support.fake_models import XSS_PAYLOAD
from tests.training.conftest import make_program, run_config
from training.insight.comparison.learned import compare_learned, mark_words
from training.models import Candidate, Run

pytestmark = pytest.mark.django_db


def finished_run(user, dataset, candidates: list[dict]) -> Run:
    program = make_program(user, dataset)
    run = Run.objects.create(
        owner=user, program=program, dataset=dataset, config=run_config(), status=Run.SUCCEEDED
    )
    for i, fields in enumerate(candidates):
        Candidate.objects.create(
            run=run,
            variable="generator",
            candidate_id=f"c{i + 1}",
            operation=fields.get("operation", "few_shot"),
            value=fields["value"],
            reward=fields.get("reward"),
            status=fields.get("status", "scored"),
        )
    return run


def example(message, team):
    return {"inputs": {"message": message}, "outputs": {"team": team}}


def test_mark_words_marks_what_differs_on_both_sides():
    first, second = mark_words(["Route it to a team.", "Route it to the billing team."])
    assert [t for t, changed in first if changed] == ["a"]
    assert [t for t, changed in second if changed] == ["the billing"]
    assert "".join(t for t, _ in second) == "Route it to the billing team."


def test_the_best_candidate_of_each_run_side_by_side(user, demo_dataset):
    shared = example("refund please", "money")
    a = finished_run(
        user,
        demo_dataset,
        [
            {"value": {"instructions": "Route it.", "examples": []}, "reward": 0.2},
            {
                "value": {"instructions": "Route it.", "examples": [shared]},
                "reward": 0.9,
                "status": "best",
            },
        ],
    )
    b = finished_run(
        user,
        demo_dataset,
        [
            {
                "value": {
                    "instructions": "Route it by team.",
                    "examples": [shared, example("app crashes", "bug")],
                },
                "reward": 0.7,
            },
            {"value": {"instructions": "Route.", "examples": []}, "reward": 0.1},
        ],
    )
    [entry] = compare_learned([a, b])
    assert entry["variable"] == "generator"
    left, right = entry["columns"]
    assert left["candidate"].candidate_id == "c2"  # marked best
    assert right["candidate"].candidate_id == "c1"  # the highest reward
    assert [t for t, changed in right["instructions"] if changed] == ["by team"]
    assert [changed for _, changed in left["examples"]] == [False]
    assert [changed for _, changed in right["examples"]] == [False, True]
    assert "app crashes" in right["examples"][1][0]


def test_compare_page_shows_them_escaped(client_user, user, demo_dataset):
    a = finished_run(
        user, demo_dataset, [{"value": {"instructions": XSS_PAYLOAD, "examples": []}, "reward": 1}]
    )
    b = finished_run(
        user, demo_dataset, [{"value": {"instructions": "Route it.", "examples": []}, "reward": 0}]
    )
    page = client_user.get(f"{reverse('training:compare')}?runs={a.pk}&runs={b.pk}")
    html = page.content.decode()
    assert page.status_code == 200 and 'id="compare-learned"' in html
    assert XSS_PAYLOAD not in html and "&lt;script&gt;window" in html
    assert (
        html.count('<div class="learned-column ') + html.count('<div class="learned-column"') == 2
    )


def test_a_retrieval_candidate_shows_its_pool_not_none(client_user, user, demo_dataset):
    pool = [dict(example(f"m{i}", "bug"), vector="AAA=") for i in range(5)]
    nearest = finished_run(
        user,
        demo_dataset,
        [
            {
                "value": {
                    "instructions": "Route.",
                    "examples": [],
                    "retrieval": {"pool": pool, "k": 4},
                },
                "reward": 0.9,
            }
        ],
    )
    plain = finished_run(
        user, demo_dataset, [{"value": {"instructions": "Route.", "examples": []}, "reward": 0.5}]
    )
    html = client_user.get(
        reverse("training:compare"), {"runs": [nearest.pk, plain.pk]}
    ).content.decode()
    assert "4 nearest of 5 pooled examples, retrieved for each input" in html
    assert html.count('<p class="muted">none</p>') == 1  # the plain run only
