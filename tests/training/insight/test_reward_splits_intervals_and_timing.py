"""Every reward a page shows names its split (test before is paired with test after, never
with the best validation reward), the test difference comes with a paired bootstrap interval
over stored per-example rewards, and a running run shows its elapsed time and an ETA."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from datasets.services import get_split
from tests.training.conftest import executed_run, make_run, run_config
from training.engine.utils import paired_bootstrap
from training.execution import summaries
from training.insight import live
from training.insight.sections import contexts
from training.models import EpochLog, Evaluation, Run

# A run whose test reward is 0.125 before and after while its best validation reward
# reads 0.263: one test row gained, another lost.
BEFORE = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
AFTER = [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def finished_run(user, program, dataset, **fields):
    """A succeeded run with those figures (``fields`` override them)."""
    defaults = {
        "status": Run.SUCCEEDED,
        "baseline_reward": 0.125,
        "final_reward": 0.125,
        "best_reward": 0.263,
        "started_at": timezone.now() - timedelta(minutes=3),
        "finished_at": timezone.now(),
    }
    defaults.update(fields)
    return make_run(user, program, dataset, **defaults)


def add_evaluation(run, phase, index, rewards):
    return Evaluation.objects.create(
        run=run,
        phase=phase,
        index=index,
        metrics={"reward": sum(rewards) / len(rewards)},
        example_rewards=rewards,
    )


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


# -- 4: which split ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_home_pairs_test_before_with_test_after_not_the_best_validation_reward(
    client_user, user, program, demo_dataset
):
    finished_run(user, program, demo_dataset)
    page = text(client_user.get(reverse("training:home")))
    assert "Test reward before → after" in page
    assert "0.125 → 0.125" in page
    assert "0.125 → 0.263" not in page and "Baseline → best" not in page


@pytest.mark.django_db
def test_runs_list_never_pairs_test_before_with_the_best_validation_reward(
    client_user, user, program, demo_dataset
):
    # cancelled before the evaluations after training: there is no test score after
    run = finished_run(user, program, demo_dataset, status=Run.CANCELLED, final_reward=None)
    page = client_user.get(reverse("training:run-list")).content.decode()
    row = re.search(rf'<tr data-run="{run.pk}">.*?</tr>', page, re.S).group(0)
    row = re.sub(r"\s+", " ", row)
    assert (
        '<td class="test-before-after key" data-label="Test before → after">0.125 → —</td>' in row
    )
    assert '0.263 <small class="muted split">validation</small>' in row
    assert "Test before → after" in page and "Best val./train" in page
    assert run.improvement is None


@pytest.mark.django_db
def test_compare_and_run_pages_name_the_split_of_each_reward(
    client_user, user, program, demo_dataset
):
    first = finished_run(user, program, demo_dataset)
    second = finished_run(user, program, demo_dataset, config=run_config(validation_split=0))
    EpochLog.objects.create(run=first, epoch=0, logs={"reward": 0.2, "val_reward": 0.263})
    page = text(client_user.get(reverse("training:compare") + f"?runs={first.pk}&runs={second.pk}"))
    assert "best reward (training)" not in page
    assert '0.263 <small class="muted split">validation</small>' in page
    assert '0.263 <small class="muted split">training</small>' in page
    run_page = text(client_user.get(first.get_absolute_url()))
    assert "<th>training reward</th><th>validation reward</th>" in run_page
    assert "Test split: before / after training" in run_page


# -- 5: paired bootstrap ----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_run_page_shows_the_paired_bootstrap_interval_and_says_within_noise(
    client_user, user, program, demo_dataset
):
    run = finished_run(user, program, demo_dataset)
    add_evaluation(run, Evaluation.BEFORE, 0, BEFORE)
    add_evaluation(run, Evaluation.AFTER, 0, AFTER)
    expected = paired_bootstrap(BEFORE, AFTER)
    assert expected.within_noise
    page = text(client_user.get(run.get_absolute_url()))
    row = re.search(r'<tr data-metric="reward">.*?</tr>', page).group(0)
    words = re.sub(r"<[^>]+>", "", row)  # "CI" is an <abbr> that says what it means
    assert f"95% CI {expected.low:+.3f} to {expected.high:+.3f}" in words
    assert "paired bootstrap over 8 test examples" in row and "within noise" in row
    # one evaluation per phase: no pretend precision
    assert "± 0.000" not in row and "(n=1)" not in row


@pytest.mark.django_db
def test_repeated_evaluations_pair_per_example_means_and_keep_a_real_spread(
    client_user, user, program, demo_dataset
):
    run = finished_run(user, program, demo_dataset, baseline_reward=0.0, final_reward=0.9)
    for index in range(2):
        add_evaluation(run, Evaluation.BEFORE, index, [0.0] * 10)
    add_evaluation(run, Evaluation.AFTER, 0, [1.0] * 10)
    add_evaluation(run, Evaluation.AFTER, 1, [1.0] * 8 + [0.0] * 2)
    rows = summaries.before_after(run.evaluations.all())
    reward = rows[0]
    assert reward["bootstrap"] == paired_bootstrap([0.0] * 10, [1.0] * 8 + [0.5] * 2).to_dict()
    assert not reward["bootstrap"]["within_noise"]
    page = text(client_user.get(run.get_absolute_url()))
    assert "(2 identical evaluations)" in page  # temperature 0: the std would say nothing
    assert '0.900 ± 0.141 <span class="muted">(std over 2 evaluations)</span>' in page
    assert "beyond noise" in page


@pytest.mark.django_db
def test_no_interval_without_per_example_rewards_on_both_sides(user, program, demo_dataset):
    run = finished_run(user, program, demo_dataset)
    add_evaluation(run, Evaluation.BEFORE, 0, BEFORE)
    Evaluation.objects.create(run=run, phase=Evaluation.AFTER, index=0, metrics={"reward": 0.1})
    assert summaries.before_after(run.evaluations.all())[0]["bootstrap"] is None


# -- 7: time, live ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_progress_fragment_of_a_running_run_has_elapsed_time_and_an_eta_from_batches_done(
    user, program, demo_dataset
):
    now = timezone.now()
    run = finished_run(
        user,
        program,
        demo_dataset,
        status=Run.RUNNING,
        finished_at=None,
        started_at=now - timedelta(seconds=90),
        training_started_at=now - timedelta(seconds=60),
        training_start_batch=4,  # resumed after epoch 1 of 4-batch epochs
        batches_per_epoch=4,
        current_epoch=1,
        current_batch=3,  # 7 of 8 batches done; 3 in 60 s since the resume
    )
    html = re.sub(r"\s+", " ", live.render_parts(run, ("progress",)))
    elapsed = re.search(r'class="run-elapsed" data-seconds="([\d.]+)">1m 3\ds<', html)
    assert elapsed and 89 <= float(elapsed.group(1)) < 100
    eta = re.search(r'class="run-eta" data-seconds="([\d.]+)">(\d+)s<', html)
    assert eta and 19 <= float(eta.group(1)) <= 21  # 20 s a batch, 1 batch left
    assert "the 3 batches done so far" in html
    assert 'data-ticking="true"' in html


class RecordingLayer:
    def __init__(self):
        self.messages: list[str] = []

    async def group_send(self, group, message):
        self.messages.append(message["html"])


@pytest.mark.django_db(transaction=True)
def test_a_run_stores_per_example_rewards_and_its_last_update_carries_the_duration(
    user, program, demo_dataset, monkeypatch
):
    layer = RecordingLayer()
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    # Every change rendered as it is stored (as on the tests' in-memory SQLite): on PostgreSQL
    # the renderer's thread merges the changes of a run this fast (a few ms a batch), and the
    # mid-training progress fragment this test reads may be merged into the next one.
    monkeypatch.setattr(live, "renders_off_thread", lambda: False)
    run = executed_run(user, program, demo_dataset)
    test_rows = len(get_split(demo_dataset, "test")[0])
    for evaluation in run.evaluations.all():
        assert len(evaluation.example_rewards) == test_rows
        mean = sum(evaluation.example_rewards) / test_rows
        assert mean == pytest.approx(evaluation.metrics["reward"])
    assert run.training_started_at is not None and run.training_start_batch == 0
    assert any('class="run-eta"' in html for html in layer.messages)
    last = re.sub(r"\s+", " ", layer.messages[-1])
    assert 'id="run-timing"' in last and 'data-ticking="false"' in last
    assert re.search(r'took <strong class="run-duration">\d+s</strong>', last)


def test_the_progress_of_a_run_past_its_last_epoch_counts_every_batch_done(
    user, program, demo_dataset
):
    """During the evaluations after training the run is still running, and the last
    epoch_end has set the batch counter to 0 of an epoch that never comes: the bar says
    every batch of the epoch is done, like the finished page."""
    run = finished_run(
        user,
        program,
        demo_dataset,
        config=run_config(epochs=2),
        status=Run.RUNNING,
        finished_at=None,
        batches_per_epoch=4,
        current_epoch=2,
        current_batch=0,
    )
    progress = contexts.progress(run)["progress"]
    assert (progress["epochs_done"], progress["batches_done"], progress["percent"]) == (2, 4, 100.0)
    html = re.sub(r"\s+", " ", live.render_parts(run, ("progress",)))
    assert 'Batches in this epoch <strong id="batches-done">4</strong> / 4' in html
