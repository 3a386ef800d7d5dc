"""The run page's "Selection" section: every scored candidate's per-example rewards are
stored, shown with an interval and paired verdicts against its parent and the seed; a
selection split chooses the final program; a cheaper candidate within noise of the best can
be saved as a program version; only the owner sees or does any of it."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from tests.training.conftest import make_program, make_run, run_config
from tests.training.runs.test_omega_runs import OMEGA, run_task
from training.engine.utils.paired_bootstrap import paired_bootstrap
from training.insight import candidate_confidence, live, provenance
from training.models import Candidate, ProgramVersion, Run
from training.programs import program_versions
from training.runs import candidate_versions

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HTTP_HX_REQUEST": "true"}


def section(client, run) -> str:
    response = client.get(reverse("training:run-selection", args=[run.pk]), **HTMX)
    assert response.status_code == 200
    return response.content.decode()


def omega(user, dataset, **overrides):
    program = make_program(user, dataset, model="fake/rules")
    return run_task(
        make_run(user, program, dataset, run_config(model="fake/rules", **{**OMEGA, **overrides}))
    )


def test_an_omega_run_stores_each_candidates_example_rewards_and_costs(user, demo_dataset):
    run = omega(user, demo_dataset)
    scored = list(run.candidates.exclude(reward=None))
    assert scored
    validation_rows = scored[0].scoring_calls
    for candidate in scored:
        assert candidate.example_rewards is not None
        assert sum(candidate.example_rewards) / len(candidate.example_rewards) == pytest.approx(
            candidate.reward, abs=1e-3
        )
        assert candidate.prompt_tokens_per_call > 0
        assert candidate.latency_per_call >= 0
        assert candidate.scoring_calls == validation_rows == len(candidate.example_rewards)
    assert run.final_selection == {}


def test_the_section_shows_intervals_and_paired_verdicts(client_user, user, demo_dataset):
    run = omega(user, demo_dataset)
    html = section(client_user, run)
    report = candidate_confidence.report(run)
    rows = {r.candidate.candidate_id: r for r in report["rows"]}
    seed = next(r for r in report["rows"] if r.candidate.operation == "seed")
    child = next(r for r in report["rows"] if r.candidate.parent_ids)
    # the interval holds the mean and is drawn from the stored rewards
    for row in rows.values():
        assert row.low <= row.reward <= row.high
        assert row.n == len(row.candidate.example_rewards)
    assert child.vs_parent is not None and child.vs_parent.n == child.n
    # the verdict is the one the two stored reward lists give: derived here from the
    # engine's paired bootstrap at the section's level, not taken from the presenter
    parent = Candidate.objects.get(
        run=run,
        variable=child.candidate.variable,
        candidate_id=child.candidate.parent_ids[0],
    )
    paired = paired_bootstrap(
        parent.example_rewards,
        child.candidate.example_rewards,
        confidence=candidate_confidence.CONFIDENCE,
        resamples=candidate_confidence.RESAMPLES,
    )
    expected = "within noise" if paired.within_noise else ("yes" if paired.low > 0 else "worse")
    assert child.vs_parent.word == expected
    assert child.vs_parent.difference == pytest.approx(
        sum(child.candidate.example_rewards) / child.n - sum(parent.example_rewards) / child.n
    )
    assert seed.vs_seed is None
    # what the page says is what the report computed
    cell = re.search(
        rf'data-candidate="{child.candidate.candidate_id}".*?<td class="vs-parent">(.*?)</td>',
        html,
        re.S,
    ).group(1)
    assert child.vs_parent.word in cell
    assert f"[{child.low:.2f}, {child.high:.2f}]" in html
    points = json.loads(re.search(r'data-points="([^"]*)"', html).group(1).replace("&quot;", '"'))
    assert {p["id"] for p in points} == set(rows)
    assert sum(p["pareto"] for p in points) == report["pareto_count"] >= 1


def test_a_finished_runs_update_carries_the_section_as_the_page_loads_it(
    client_user, user, demo_dataset
):
    """The run's finish sends every part, the Selection section among them, so a
    page watched to the end shows where the final prompt came from without a reload; drawn
    from a context of its own, the per-example table beside it is unchanged."""
    run = omega(user, demo_dataset)
    update = live.render_parts(run)
    fragment = live.render_parts(run, ("candidate_confidence",))
    assert fragment in update
    assert 'hx-swap-oob="true"' in fragment and 'id="provenance"' in fragment
    without_token = re.compile(r'(name="csrfmiddlewaretoken" value=)"[^"]*"')  # a page's own
    assert without_token.sub(r"\1", fragment.replace(' hx-swap-oob="true"', "")) == (
        without_token.sub(r"\1", section(client_user, run))
    )
    assert live.render_parts(run, ("examples",)) in update


def test_a_second_drawing_of_the_section_draws_only_what_changed(user, demo_dataset, monkeypatch):
    """The section is drawn again at each candidate event of a live run (in the worker): the
    intervals and verdicts already drawn are not drawn again, only a new candidate's."""
    run = omega(user, demo_dataset)
    first = candidate_confidence.report(run)
    drawn: list[tuple[list[float], list[float]]] = []
    real = candidate_confidence.paired_bootstrap
    monkeypatch.setattr(
        candidate_confidence,
        "paired_bootstrap",
        lambda before, after, **kw: (
            drawn.append((list(before), list(after))) or real(before, after, **kw)
        ),
    )
    again = candidate_confidence.report(run)
    assert drawn == []  # nothing new: every interval and verdict was drawn before
    assert [(r.low, r.high) for r in again["rows"]] == [(r.low, r.high) for r in first["rows"]]
    newest = run.candidates.exclude(reward=None).exclude(operation="seed").first()
    newest.example_rewards = [1.0 - value for value in newest.example_rewards]
    newest.save(update_fields=["example_rewards"])
    candidate_confidence.report(run)
    changed = list(newest.example_rewards)
    assert ([0.0] * len(changed), changed) in drawn  # its interval, drawn afresh
    assert all(changed in pair for pair in drawn)  # and only what involves it


def test_verdicts_on_the_same_examples():
    sure = candidate_confidence.verdict([0.0] * 30, [1.0] * 30)
    assert sure.word == "yes" and sure.low > 0
    worse = candidate_confidence.verdict([1.0] * 30, [0.0] * 30)
    assert worse.word == "worse"
    one_more = candidate_confidence.verdict([0.0] * 10, [1.0] + [0.0] * 9)
    assert one_more.word == "within noise" and one_more.low <= 0 <= one_more.high
    assert candidate_confidence.verdict([1.0] * 3, [1.0] * 4) is None  # not paired


def test_a_selection_split_picks_the_final_program_and_is_shown(client_user, user, demo_dataset):
    run = omega(user, demo_dataset, selection_split=0.25)
    assert run.config["selection_split"] == 0.25
    [entry] = run.final_selection.values()
    assert entry["chosen_id"] in entry["contenders"]
    contenders = Candidate.objects.filter(run=run, candidate_id__in=entry["contenders"])
    assert all(c.selection_reward is not None for c in contenders)
    assert run.candidates.get(status="best").candidate_id == entry["chosen_id"]
    html = section(client_user, run)
    assert 'id="selection-scatter"' in html
    assert f'<strong class="chosen-id">{entry["chosen_id"]}</strong>' in html


def test_use_this_one_saves_a_cheaper_candidate_as_a_version(client_user, user, demo_dataset):
    run = omega(user, demo_dataset)
    candidate = run.candidates.exclude(reward=None).last()
    response = client_user.post(reverse("training:candidate-use", args=[run.pk, candidate.pk]))
    version = ProgramVersion.objects.get(source_candidate=candidate)
    assert response.status_code == 302 and response.url == version.get_absolute_url()
    assert version.number == 2 and version.source_run_number == run.pk
    saved = program_versions.variables_of(version.engine_json)[candidate.variable]
    assert saved["instructions"] == candidate.value["instructions"]
    assert saved["examples"] == candidate.value["examples"]
    with pytest.raises(candidate_versions.CandidateVersionError, match="already version 2"):
        candidate_versions.save_candidate(run, candidate)


def test_others_get_404(client, other_user, user, demo_dataset):
    run = omega(user, demo_dataset, epochs=1)
    candidate = run.candidates.first()
    client.force_login(other_user)
    assert client.get(reverse("training:run-selection", args=[run.pk]), **HTMX).status_code == 404
    url = reverse("training:candidate-use", args=[run.pk, candidate.pk])
    assert client.post(url).status_code == 404
    assert not ProgramVersion.objects.filter(source_candidate=candidate).exists()
    assert Run.objects.get(pk=run.pk).status == Run.SUCCEEDED


def test_the_leaderboard_marks_wins_within_noise(client_user, user, program, demo_dataset):
    run = make_run(user, program, demo_dataset, status=Run.SUCCEEDED)
    rewards = {
        "c1": [0.0] * 10,
        "c2": [1.0] + [0.0] * 9,
        "c3": [1.0] * 8 + [0.0] * 2,
        "c4": [1.0] * 7 + [0.0] * 3,
    }
    for cid, values in rewards.items():
        Candidate.objects.create(
            run=run,
            variable="generator/state",
            candidate_id=cid,
            parent_ids=[] if cid == "c1" else ["c1"],
            operation="seed" if cid == "c1" else "mutation",
            value={"instructions": cid, "examples": []},
            reward=sum(values) / len(values),
            status="best" if cid == "c3" else "kept",
            example_rewards=values,
            prompt_tokens_per_call={"c1": 50.0, "c2": 40.0, "c3": 90.0, "c4": 60.0}[cid],
        )
    page = client_user.get(run.get_absolute_url()).content.decode()

    def leaderboard_row(cid):
        return re.search(
            rf'<tr class="candidate [^"]*"[^>]*data-candidate="{cid}".*?</tr>', page, re.S
        )[0]

    assert "within noise" in leaderboard_row("c2")  # one example above the seed of ten
    assert "within noise" not in leaderboard_row("c3")  # eight above: beyond noise
    assert "within noise" not in leaderboard_row("c1")
    rows = {r.candidate.candidate_id: r for r in candidate_confidence.report(run)["rows"]}
    assert rows["c2"].vs_seed.word == "within noise" and rows["c3"].vs_seed.word == "yes"
    # c2 is cheaper than the best (c3) but worse beyond noise; c1 likewise: no "use this one"
    assert rows["c3"].vs_best is None
    assert rows["c2"].vs_best.word == "worse" and not rows["c2"].cheaper_within_noise
    # the front: c2 (40 tokens, 0.1), c4 (60, 0.7), c3 (90, 0.8); c1 (50, 0.0) is dominated
    assert {cid for cid, r in rows.items() if r.pareto} == {"c2", "c3", "c4"}
    # c4: a third fewer tokens than the best, one example below it: "use this one"
    assert rows["c4"].vs_best.word == "within noise" and rows["c4"].cheaper_within_noise
    html = section(client_user, run)
    buttons = re.findall(r'data-candidate="(c\d)".*?(use-candidate|</tr>)', html, re.S)
    assert [cid for cid, what in buttons if what == "use-candidate"] == ["c4"]


def test_provenance_names_the_step_that_introduced_each_part(
    client_user, user, program, demo_dataset
):
    run = make_run(user, program, demo_dataset, status=Run.SUCCEEDED)
    example = {"inputs": {"message": "<b>refund</b> please"}, "outputs": {"team": "money"}}
    rows = [
        ("c1", [], "seed", "Route the message.", [], 0.2),
        ("c2", ["c1"], "mutation", "Route the message. Refunds go to money.", [], 0.5),
        ("c3", ["c2"], "few_shot", "Route the message. Refunds go to money.", [example], 0.6),
        (
            "c4",
            ["c3", "c1"],
            "crossover",
            "Route the message. Refunds go to money. Be brief.",
            [example],
            0.7,
        ),
    ]
    for cid, parents, operation, text, examples, reward in rows:
        Candidate.objects.create(
            run=run,
            variable="generator/state",
            candidate_id=cid,
            parent_ids=parents,
            operation=operation,
            value={"instructions": text, "examples": examples},
            reward=reward,
            status="best" if cid == "c4" else "kept",
            epoch=int(cid[1]) - 1,
        )
    [entry] = provenance.provenance(run)
    origins = {p.text if p.kind == "sentence" else "example": p for p in entry["pieces"]}
    assert origins["Route the message."].before_training
    assert origins["Refunds go to money."].origin.candidate_id == "c2"
    assert origins["Refunds go to money."].reward_change == pytest.approx(0.3)
    assert origins["example"].origin.candidate_id == "c3"
    assert origins["example"].origin.operation == "few_shot"
    assert origins["Be brief."].origin.candidate_id == "c4"
    assert origins["Be brief."].reward_change == pytest.approx(0.1)  # against c3, its first parent
    html = section(client_user, run)
    shown = re.findall(r'<tr class="provenance-row" data-kind="(\w+)" data-origin="(c\d)"', html)
    assert shown == [("sentence", "c1"), ("sentence", "c2"), ("sentence", "c4"), ("example", "c3")]
    assert "&lt;b&gt;refund&lt;/b&gt;" in html and "<b>refund</b>" not in html
