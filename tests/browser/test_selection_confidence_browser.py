"""Honest selection and cost/quality on a finished OMEGA run, in a real browser: the launch
form offers a selection split with its help; the run page's "Selection" section shows every
candidate's interval and paired verdicts, the selection split's choice and its chart, the
reward-against-prompt-tokens chart with the non-dominated candidates marked, and the ablation
of a sentence and an example of the final prompt (forecast, worker, paired interval, kept)."""

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
    unfold,
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
    fill_fields(page, epochs=3, batch_size=8, validation_split=0.5, selection_split=0.2, seed=7)
    run_id = launch_from_form(page)
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=90_000)
    assert run_field(live_stack, run_id, "config")["selection_split"] == 0.2
    final = run_field(live_stack, run_id, "final_selection")
    [entry] = final.values()
    page.reload()

    unfold(page, "selection")  # folded by default: an advanced section
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

    ablate_a_sentence_and_an_example(page, live_stack, run_id, shown)

    screenshot(page, "selection-1280")
    page.set_viewport_size({"width": 390, "height": 900})
    scroll_to(page, "#selection-section")
    assert fits_the_width(page)  # the wide table scrolls inside its card
    screenshot(page, "selection-390")


def ablation_rows(live_stack, run_id: int) -> list[dict]:
    """The stored ablations, and each one's paired bootstrap recomputed here from its stored
    rewards and the final candidate's (the engine's ``paired_bootstrap``)."""
    code = f"""
import json
from training.engine.utils.paired_bootstrap import paired_bootstrap
from training.models import Ablation, Candidate
rows = []
for a in Ablation.objects.filter(run_id={run_id}).order_by("id"):
    final = Candidate.objects.get(run_id={run_id}, variable=a.variable, status="best")
    p = paired_bootstrap(final.example_rewards[:a.rows], a.example_rewards or [])
    rows.append({{"status": a.status, "calls": a.calls, "forecast": a.forecast_calls,
                  "rows": a.rows, "n_final": len(final.example_rewards), "kind": a.kind,
                  "difference": a.difference, "low": a.low, "high": a.high,
                  "again": [p.difference, p.low, p.high], "finished": str(a.finished_at),
                  "instructions": a.value.get("instructions"),
                  "examples": len(a.value.get("examples") or []),
                  "final_examples": len(final.value.get("examples") or [])}})
print(json.dumps(rows))
"""
    return json.loads(shell(live_stack, code))


def ablate_a_sentence_and_an_example(page, live_stack, run_id: int, shown: list) -> None:
    """Ablate the first sentence and the first example: the forecast's calls first, then the
    worker's effect with its interval; after a reload both are there, and asking again
    scores nothing."""
    kinds = [kind for kind, _ in shown]
    places = [kinds.index("sentence"), kinds.index("example")]
    rows = page.locator("#provenance tr.provenance-row")
    sentence = rows.nth(places[0]).locator(".provenance-text").inner_text()
    for number, place in enumerate(places, start=1):
        cell = rows.nth(place).locator(".ablation-cell")
        cell.locator(".ablation-ask").click()
        forecast_calls = int(cell.locator(".ablation-forecast-calls").inner_text())
        cell.locator(".ablation-confirm").click()
        expect(cell.locator(".ablation-difference")).to_be_visible(timeout=60_000)
        stored = ablation_rows(live_stack, run_id)
        assert len(stored) == number
        row = stored[-1]
        # one generator, an exact-match reward: a call per example the final was scored on
        assert forecast_calls == row["forecast"] == row["rows"] == row["n_final"] == row["calls"]
        assert row["status"] == "done"
        assert [row["difference"], row["low"], row["high"]] == pytest.approx(row["again"])
        expect(cell.locator(".ablation-difference")).to_have_text(f"{row['difference']:+.3f}")
        expect(cell.locator(".ablation-interval")).to_have_text(
            f"[{row['low']:.2f}, {row['high']:.2f}]"
        )
        expect(cell.locator(".ablation-calls")).to_contain_text(f"{row['calls']} calls")
    first, second = ablation_rows(live_stack, run_id)
    assert sentence not in first["instructions"] and first["examples"] == first["final_examples"]
    assert second["examples"] == second["final_examples"] - 1

    page.reload()
    scroll_to(page, "#provenance")
    rows = page.locator("#provenance tr.provenance-row")
    rows.first.wait_for(timeout=30_000)
    for place in places:
        expect(rows.nth(place).locator('.ablation-cell[data-status="done"]')).to_have_count(1)
    expect(page.locator(".ablation-cell .ablation-difference")).to_have_count(2)
    # asking again (the same POST the button sends) answers the stored result: nothing scored
    cell = rows.nth(places[0]).locator(".ablation-cell")
    page.evaluate(
        """([cell, variable, piece]) => htmx.ajax("POST", cell.dataset.url,
              {target: cell, swap: "outerHTML", values: {variable, piece}})""",
        [cell.element_handle(), cell.get_attribute("data-variable"), str(places[0])],
    )
    expect(rows.nth(places[0]).locator(".ablation-difference")).to_be_visible()
    assert ablation_rows(live_stack, run_id) == [first, second]
