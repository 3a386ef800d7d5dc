"""Significance everywhere, in Chromium: on the home page, the runs list and
Compare, a change within noise reads in the text's own colour beside its interval, and only
a change beyond noise is green; the pages still fit 390 px."""

from __future__ import annotations

import pytest
from helpers_runs import demo_program, shell

pytestmark = pytest.mark.browser

RUN_WITH = """
from django.utils import timezone
from training.models import Evaluation, Program, Run
program = Program.objects.get(pk={program})
before, after = {before!r}, {after!r}
run = Run.objects.create(owner=program.owner, program=program, dataset=program.dataset,
    config={{"optimizer": {{"name": "RandomFewShot", "params": {{}}}}, "epochs": 1, "batch_size": 8}},
    status=Run.SUCCEEDED, started_at=timezone.now(), finished_at=timezone.now(),
    baseline_reward=sum(before) / len(before), final_reward=sum(after) / len(after))
for phase, rewards in (("before", before), ("after", after)):
    Evaluation.objects.create(run=run, phase=phase, index=0,
        metrics={{"reward": sum(rewards) / len(rewards)}}, example_rewards=rewards)
print(run.pk)
"""
GREEN = "rgb(22, 101, 52)"  # .diff.up, training.css


def colour(page, selector: str) -> str:
    """The computed colour of the first element ``selector`` finds (the session's live stack
    holds other tests' runs too)."""
    return page.locator(selector).first.evaluate("e => getComputedStyle(e).color")


def test_only_a_change_beyond_noise_is_coloured_and_each_shows_its_interval(
    logged_in_page, live_stack
):
    page = logged_in_page
    _dataset, program = demo_program(live_stack, "Significance", "fake/fewshot")
    noisy = int(
        shell(
            live_stack,
            RUN_WITH.format(program=program, before=[0.0] * 4, after=[0.0, 1.0, 0.0, 0.0]),
        )
    )
    real = int(
        shell(live_stack, RUN_WITH.format(program=program, before=[0.0] * 12, after=[1.0] * 12))
    )
    text_colour = None
    for url in ("/", "/runs/", f"/compare/?runs={noisy}&runs={real}", "/compare/"):
        page.goto(url)
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            assert page.evaluate("document.documentElement.scrollWidth") <= width, url
        if url.startswith("/compare/?"):  # the metrics table: the change of each run
            cells = page.locator("#compare-metrics .diff").all()
            assert cells, url
            shown = {c.inner_text(): c.evaluate("e => getComputedStyle(e).color") for c in cells}
            assert shown["(+1.000)"] == GREEN and shown["(+0.250)"] != GREEN
            continue
        noisy_change = f'tr[data-run="{noisy}"] .test-change' if url == "/runs/" else None
        within = page.locator(noisy_change or '.test-change[data-noise="within"]').first
        beyond = page.locator('.test-change[data-noise="beyond"]').first
        assert within.locator(".ci").inner_text().endswith("noise"), url
        assert beyond.locator(".ci").is_visible(), url
        text_colour = within.evaluate("e => getComputedStyle(e.closest('td')).color")
        assert (
            colour(page, f"{noisy_change or '.test-change[data-noise=within]'} .diff")
            == text_colour
        )
        assert beyond.locator(".diff").evaluate("e => getComputedStyle(e).color") == GREEN
