"""A finished run says what its training came to (``Run.outcome``): improved, no better than
the seed, changed within noise, or worse; a run that did not improve never reads as a green
"Succeeded", and its page says why in plain words with the evidence and the next steps."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from django.urls import reverse

from tests.training.conftest import make_run, run_config
from training.execution import summaries
from training.models import Evaluation, Run


def evaluations(before: list[float], after: list[float]) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(phase="before", example_rewards=before),
        SimpleNamespace(phase="after", example_rewards=after),
    ]


def test_the_outcome_is_the_seed_kept_or_the_test_splits_paired_verdict():
    gained = evaluations([0.0] * 30, [1.0] * 20 + [0.0] * 10)
    assert summaries.outcome(gained, kept_seed=False) == "improved"
    assert summaries.outcome(gained, kept_seed=True) == "no_better"
    lost = evaluations([1.0] * 30, [1.0] * 10 + [0.0] * 20)
    assert summaries.outcome(lost, kept_seed=False) == "worse"
    noise = evaluations([1.0, 0.0] * 10, [0.0, 1.0] * 9 + [1.0, 1.0])
    assert summaries.outcome(noise, kept_seed=False) == "within_noise"
    assert summaries.outcome([], kept_seed=False) == "within_noise"  # no test split to tell


def finished(user, program, dataset, outcome, before, after) -> Run:
    run = make_run(
        user,
        program,
        dataset,
        run_config(epochs=1),
        status=Run.SUCCEEDED,
        outcome=outcome,
        baseline_reward=sum(before) / len(before),
        final_reward=sum(after) / len(after),
    )
    Evaluation.objects.create(run=run, phase="before", index=0, metrics={}, example_rewards=before)
    Evaluation.objects.create(run=run, phase="after", index=0, metrics={}, example_rewards=after)
    return run


@pytest.mark.django_db
def test_a_worse_run_reads_as_worse_everywhere_never_as_succeeded(
    client_user, user, program, demo_dataset
):
    run = finished(user, program, demo_dataset, Run.WORSE, [1.0] * 12, [0.0] * 12)
    badge = 'data-status="succeeded" data-outcome="worse">Worse than the seed</span>'
    for page in ("training:home", "training:run-list"):
        html = client_user.get(reverse(page)).content.decode()
        assert badge in html and ">Succeeded</span>" not in html
    html = client_user.get(run.get_absolute_url()).content.decode()
    assert badge in html
    advice = html[html.index('id="run-happened"') :]
    assert "scored lower on the test split (1.000 → 0.000, beyond noise)" in advice
    assert "Keep the starting program" in advice


@pytest.mark.django_db
def test_a_change_the_test_split_cannot_tell_asks_for_a_larger_test_split(
    client_user, user, program, demo_dataset
):
    run = finished(user, program, demo_dataset, Run.WITHIN_NOISE, [0.0, 1.0] * 6, [1.0] * 12)
    html = client_user.get(run.get_absolute_url()).content.decode()
    assert 'data-outcome="within_noise">Changed, within noise on test</span>' in html
    advice = html[html.index('id="run-happened"') :]
    rows = demo_dataset.test_count
    assert f"The trained program changed (+0.500), but {rows} test rows cannot tell" in advice
    keys = re.findall(r'<li data-step="([a-z_]+)">', advice)
    assert "larger_test" in keys
    assert f"{rows} test rows tell differences above about" in advice


def test_the_rows_a_candidate_is_judged_on_follow_the_splits_and_the_optimizer():
    from training.execution.forecast import judged_rows

    def config(name, **splits):
        return {"optimizer": {"name": name}, **splits}

    assert judged_rows(100, config("RandomFewShot", validation_split=0.2)) == 20
    # validation is cut from what the selection split leaves: 80 rows, then 16
    assert (
        judged_rows(100, config("RandomFewShot", validation_split=0.2, selection_split=0.2)) == 16
    )
    # a cross-fitting optimizer judges on every training row the selection split leaves
    assert judged_rows(100, config("CalibratedLabels", validation_split=0.2)) == 100
    assert judged_rows(100, config("CalibratedLabels", selection_split=0.2)) == 80
