"""Significance everywhere: every before → after — home page, runs list, compare,
run page — shows the paired bootstrap interval the run page computes and colours the change
only beyond noise; the before/after PNG says "test" and prints "mean ± std" only over
several evaluations."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from PIL import Image

from tests.training.insight.test_reward_splits_intervals_and_timing import (
    add_evaluation,
    finished_run,
)
from training.engine.utils import paired_bootstrap
from training.models import Evaluation

pytestmark = pytest.mark.django_db

#: +0.250 on 4 examples, one flipped: the interval holds 0 (a runs-list +0.250 within noise).
NOISY = ([0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0])
#: +1.000 on 12 examples, every one right after: beyond noise.
REAL = ([0.0] * 12, [1.0] * 12)


def run_with(user, program, dataset, rewards, repeats=1):
    before, after = rewards
    run = finished_run(
        user,
        program,
        dataset,
        baseline_reward=sum(before) / len(before),
        final_reward=sum(after) / len(after),
    )
    for index in range(repeats):
        add_evaluation(run, Evaluation.BEFORE, index, before)
        add_evaluation(run, Evaluation.AFTER, index, after)
    return run


def change_of(html: str, run_id: int) -> str:
    """The change markup of run ``run_id``'s row."""
    row = re.search(rf'<tr data-run="{run_id}".*?</tr>', html, re.S)
    return re.sub(r"\s+", " ", (row.group(0) if row else html))


def expected(rewards) -> str:
    ci = paired_bootstrap(*rewards)
    return f"[{ci.low:+.3f}, {ci.high:+.3f}]"


def test_home_runs_list_and_compare_show_the_interval_and_colour_only_beyond_noise(
    client_user, user, program, demo_dataset
):
    noisy = run_with(user, program, demo_dataset, NOISY)
    real = run_with(user, program, demo_dataset, REAL)
    assert paired_bootstrap(*NOISY).within_noise and not paired_bootstrap(*REAL).within_noise
    pages = {
        "home": client_user.get(reverse("training:home")).content.decode(),
        "runs": client_user.get(reverse("training:run-list")).content.decode(),
        "compare choices": client_user.get(reverse("training:compare")).content.decode(),
    }
    for name, html in pages.items():
        html = re.sub(r"\s+", " ", html)
        noisy_change = (
            '<span class="test-change" data-noise="within"><span class="diff flat">+0.250</span>'
            f' <small class="ci" title="95% paired bootstrap interval over 4 test examples">'
            f"{expected(NOISY)} noise</small></span>"
        )
        real_change = (
            '<span class="test-change" data-noise="beyond"><span class="diff up">+1.000</span>'
            f' <small class="ci" title="95% paired bootstrap interval over 12 test examples">'
            f"{expected(REAL)}</small></span>"
        )
        assert noisy_change in html, name
        assert real_change in html, name
    runs_list = pages["runs"]
    assert 'class="diff up"' not in change_of(runs_list, noisy.pk)
    compare = client_user.get(
        reverse("training:compare"), {"runs": [noisy.pk, real.pk]}
    ).content.decode()
    # the metrics table: the noisy run's change is not coloured, the real one is
    assert '<span class="diff flat">(+0.250)</span>' in compare
    assert '<span class="diff up">(+1.000)</span>' in compare
    page = client_user.get(reverse("training:run-detail", args=[noisy.pk])).content.decode()
    assert '<td class="diff flat">+0.250' in page and "within noise" in page


def _png_words(response) -> str:
    path = b"".join(response.streaming_content) if response.streaming else response.content
    from io import BytesIO

    return Image.open(BytesIO(path)).text["Description"]


def test_the_before_after_png_says_test_and_no_mean_and_std_over_one_evaluation(
    client_user, user, program, demo_dataset
):
    once = run_with(user, program, demo_dataset, REAL)
    words = _png_words(client_user.get(reverse("training:run-plot", args=[once.pk, "evaluation"])))
    assert "test split before / after training" in words
    assert "test before training (n = 1)" in words and "test after training (n = 1)" in words
    assert "±" not in words
    twice = run_with(user, program, demo_dataset, REAL, repeats=2)
    words = _png_words(client_user.get(reverse("training:run-plot", args=[twice.pk, "evaluation"])))
    assert "Test score (mean ± std)" in words
