"""The run page says how many candidates beat the seed beyond noise (the optimizer's
``selection`` event, stored in ``Run.selection``): the engine's one rule, the paired interval
of a candidate's gain on the same validation rows above 0."""

from __future__ import annotations

import re

import pytest

from tests.training.runs.test_nearest_few_shot_runs import executed as nearest_run
from tests.training.runs.test_omega_runs import run_with_failing_mutations
from training.engine.optimizers import selection as engine_selection
from training.models import Candidate, Run


def as_engine(candidate: Candidate) -> dict:
    return {
        "id": candidate.candidate_id,
        "operation": candidate.operation,
        "reward": candidate.reward,
        "example_rewards": candidate.example_rewards,
    }


@pytest.mark.django_db(transaction=True)
def test_run_page_says_how_many_candidates_beat_the_seed(client_user, user, demo_dataset):
    run = nearest_run(user, demo_dataset, epochs=2)
    [(variable, selection)] = run.selection.items()
    assert variable == "generator/state"
    assert selection["epoch"] == 1  # the last epoch's selection
    scored = Candidate.objects.filter(run=run).exclude(operation="seed").exclude(reward=None)
    assert selection["candidates"] == scored.count() > 0
    seed = as_engine(Candidate.objects.get(run=run, operation="seed"))
    beating = [c for c in scored if engine_selection.beats_seed(as_engine(c), seed, 0.0)]
    assert selection["beat_seed"] == len(beating) >= 1  # the retrieved examples teach it
    best = Candidate.objects.get(run=run, status="best")
    assert selection["champion_id"] == best.candidate_id

    html = client_user.get(run.get_absolute_url()).content.decode()
    summary = html[html.index('id="run-selection"') :]
    expected = rf'data-beat-seed="{len(beating)}">{len(beating)} of {scored.count()}</strong>'
    assert re.search(expected, summary)
    assert "beat the seed beyond noise" in summary


@pytest.mark.django_db(transaction=True)
def test_a_run_that_learns_nothing_keeps_its_seed_and_says_none_beat_it(
    client_user, user, demo_dataset
):
    # every mutation fails: nothing but the seed is scored
    run = run_with_failing_mutations(user, demo_dataset, epochs=1)
    assert run.status == Run.SUCCEEDED, run.error
    [selection] = run.selection.values()
    assert selection["beat_seed"] == 0 and selection["candidates"] == 0
    html = client_user.get(run.get_absolute_url()).content.decode()
    assert 'data-beat-seed="0">0 of 0</strong> candidates beat the seed' in html
