"""Honest selection and cost/quality on a finished OMEGA run, in a real browser: the launch
form offers a selection split with its help; the run page's "Selection" section shows every
candidate's interval and paired verdicts, the selection split's choice and its chart, and the
reward-against-prompt-tokens chart with the non-dominated candidates marked."""

from __future__ import annotations

import json
import re

import pytest
from helpers_runs import (
    fill_fields,
    fits_the_width,
    launch_from_form,
    open_advanced,
    open_launch_form,
    run_field,
    screenshot,
    scroll_to,
    shell,
)
from playwright.sync_api import expect

from training.engine.bounds import SELECTION_SPLIT

pytestmark = pytest.mark.browser


def report(live_stack, run_id: int) -> dict:
    code = f"""
import json
from training.models import Run
from training.insight import candidate_confidence, provenance
run = Run.objects.get(pk={run_id})
r = candidate_confidence.report(run)
[entry] = provenance.provenance(run)
final = entry["final"].value
print(json.dumps({{
    "rows": [{{"id": x.candidate.candidate_id, "low": x.low, "high": x.high,
               "parent": x.vs_parent.word if x.vs_parent else None,
               "seed": x.vs_seed.word if x.vs_seed else None,
               "noise": x.win_within_noise}} for x in r["rows"]],
    "pareto": r["pareto_count"], "costed": r["costed_count"],
    "pieces": [[p.kind, p.origin.candidate_id] for p in entry["pieces"]],
    "parts": len(provenance.sentences(final["instructions"])) + len(final["examples"])}}))
"""
    return json.loads(shell(live_stack, code))


def test_intervals_verdicts_and_charts_of_an_omega_run(logged_in_page, live_stack):
    page = logged_in_page
    open_launch_form(page, live_stack, "Selection", "fake/rules?latency=0.01", "OMEGA")
    open_advanced(page)
    # the form offers the selection split with its help text, within the engine's bound
    field = page.locator("#id_selection_split")
    assert field.get_attribute("max") == str(SELECTION_SPLIT.max)
    expect(page.locator("#field-selection_split .hint")).to_contain_text(
        "held out from training and validation"
    )
    fill_fields(page, omega_embedding_model="fake/embedding", omega_population_size=4)
    fill_fields(page, epochs=3, batch_size=8, validation_split=0.25, selection_split=0.2, seed=7)
    run_id = launch_from_form(page)
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=90_000)
    assert run_field(live_stack, run_id, "config")["selection_split"] == 0.2
    final = run_field(live_stack, run_id, "final_selection")
    [entry] = final.values()
    page.reload()

    scroll_to(page, "#selection-section")
    table = page.locator("#confidence-table")
    table.wait_for(timeout=30_000)
    expected = report(live_stack, run_id)
    rows = page.locator("tr.confidence-row")
    expect(rows).to_have_count(len(expected["rows"]))
    for row in expected["rows"]:
        cells = page.locator(f'tr.confidence-row[data-candidate="{row["id"]}"]')
        assert (
            f"[{row['low']:.2f}, {row['high']:.2f}]"
            in cells.locator(".reward-interval").inner_text()
        )
        if row["parent"]:
            expect(cells.locator(".vs-parent .verdict")).to_have_text(row["parent"])
        if row["seed"]:
            expect(cells.locator(".vs-seed .verdict")).to_have_text(row["seed"])
        expect(cells.locator(".noise-mark")).to_have_count(1 if row["noise"] else 0)
    assert any(r["parent"] for r in expected["rows"])

    # the selection split's choice, and validation against selection per contender
    expect(page.locator("#final-selection .chosen-id")).to_have_text(entry["chosen_id"])
    expect(page.locator("#selection-scatter circle.chart-point")).to_have_count(
        len(entry["contenders"])
    )
    expect(page.locator("#selection-scatter circle.chosen")).to_have_count(1)

    # reward against prompt tokens: every costed candidate, the front marked
    chart = page.locator("#cost-quality-chart")
    expect(chart.locator("circle.chart-point")).to_have_count(expected["costed"])
    expect(chart.locator("circle.pareto")).to_have_count(expected["pareto"])
    assert expected["pareto"] >= 1
    expect(page.locator("td.pareto .pareto-mark")).to_have_count(expected["pareto"])
    # points with the same tokens and reward overlap: the tip is asked for directly
    chart.locator("circle.pareto").first.dispatch_event("mouseenter")
    expect(page.locator("#selection-tip")).to_contain_text(re.compile(r"prompt tokens/call"))

    # every sentence and example of the final prompt says where it came from
    pieces = page.locator("#provenance tr.provenance-row")
    expect(pieces).to_have_count(expected["parts"])
    shown = [[r.get_attribute("data-kind"), r.get_attribute("data-origin")] for r in pieces.all()]
    assert shown == expected["pieces"]
    assert any(kind == "example" for kind, _ in shown)  # OMEGA here draws few-shot examples

    screenshot(page, "selection-1280")
    page.set_viewport_size({"width": 390, "height": 900})
    scroll_to(page, "#selection-section")
    assert fits_the_width(page)  # the wide table scrolls inside its card
    screenshot(page, "selection-390")
