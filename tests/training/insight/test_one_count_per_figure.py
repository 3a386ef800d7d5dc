"""One page, one figure per fact: the forecast's "actual so far" and the LM usage
are sent at the same moments, a reward is rounded one way on the whole page, and a time
summed over concurrent calls says so."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string

from tests.training.conftest import make_program, make_run
from training.insight.sections import registry
from training.models import Run
from training.templatetags.training_extras import num


def test_the_forecast_actual_and_the_usage_count_are_always_sent_together():
    usage, forecast = registry.named(["usage", "forecast"])
    assert set(usage.changed_by) == set(forecast.changed_by)
    assert not usage.at_most_every and not forecast.at_most_every


@pytest.mark.django_db
def test_the_selection_summary_rounds_a_reward_like_the_candidate_table(user, demo_dataset):
    run = make_run(user, make_program(user, demo_dataset), demo_dataset, status=Run.SUCCEEDED)
    run.selection = {
        "gen/state": {
            "epoch": 0,
            "candidates": 3,
            "beat_seed": 1,
            "margin": 0.0625,
            "seed_reward": 0.5,
            "champion_id": "c1",
            "champion_reward": 0.5625,
        }
    }
    html = render_to_string("training/partials/run_selection.html", {"run": run})
    assert f"kept: <code>c1</code> ({num(0.5625)})" in html
    assert num(0.5625) == "0.562"


@pytest.mark.django_db
def test_a_summed_call_time_says_it_is_summed(user, demo_dataset):
    run = make_run(user, make_program(user, demo_dataset), demo_dataset, status=Run.SUCCEEDED)
    spend = {
        "rows": [
            {
                "role": "prediction",
                "label": "Predictions",
                "calls": 4,
                "failures": 0,
                "calls_share": 100,
                "tokens": 10,
                "cost": 0.0,
                "seconds": 8.0,
                "hits": 0,
            }
        ],
        "total": {"calls": 4, "tokens": 10, "cost": 0.0, "seconds": 8.0, "hits": 0},
        "cost_known": True,
    }
    html = render_to_string("training/partials/run_spend.html", {"run": run, "spend": spend})
    assert 'Call time <span class="muted">(summed over concurrent calls)</span>' in html


@pytest.mark.django_db
def test_a_spend_total_with_embeddings_says_it_is_not_the_lm_call_count(user, demo_dataset):
    run = make_run(
        user,
        make_program(user, demo_dataset),
        demo_dataset,
        status=Run.SUCCEEDED,
        lm_calls=279,
        usage={"calls": 279, "embedding_calls": 4},
    )
    spend = {
        "rows": [],
        "total": {"calls": 283, "tokens": 0, "cost": 0.0, "seconds": 0.0, "hits": 0},
        "cost_known": True,
    }
    spend["rows"] = [
        dict(spend["total"], role="prediction", label="Predictions", failures=0, calls_share=100)
    ]
    html = render_to_string("training/partials/run_spend.html", {"run": run, "spend": spend})
    assert (
        'Total <span class="muted" id="spend-total-basis">(LM calls and embedding calls)</span>'
        in html
    )
