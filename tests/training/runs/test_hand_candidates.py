"""Your own candidate in a live population: on a paused (or running) OMEGA or
RandomFewShot run, a candidate's instructions edited by hand join the population at the
worker's next batch end, are scored like any other and shown "by hand" in the leaderboard
and the lineage. Runs execute in-process on the scripted fake LMs."""

from __future__ import annotations

import json
import re
from html import escape as html_escape

import pytest
from django.urls import reverse

import training.engine as synalinks
from tests.engine.helpers_engine import build_program, few_shot_learner
from tests.training.conftest import make_program, make_run, run_config
from training.engine.optimizers.optimizer import MAX_BY_HAND_CHARS, by_hand_size
from training.execution import attempt as execution
from training.models import Candidate, HandCandidate, Run
from training.runs import hand_candidates, launch
from training.runs.branching import Edits

pytestmark = pytest.mark.django_db(transaction=True)

OMEGA = {
    "optimizer": "OMEGA",
    "omega_embedding_model": "fake/embedding",
    "omega_population_size": 4,
}
HAND = "Route each message to the team that owns it: money, bug or box."


def paused_with_scored_candidates(user, dataset, model, **config):
    """A run paused (after a batch) once it has scored candidates: RandomFewShot scores at an
    epoch's end, so it pauses after batch after batch until then; returned refreshed."""
    program = make_program(user, dataset, model=model)
    settings = {"epochs": 3, "evaluations_before": 0, "evaluations_after": 1, **config}
    run = make_run(user, program, dataset, run_config(model=model, **settings))
    while True:
        Run.objects.filter(pk=run.pk).update(pause_requested=True)
        assert execution.execute(run.pk, run.attempt) == Run.PAUSED
        run.refresh_from_db()
        if Candidate.objects.filter(run=run).exclude(reward=None).exists():
            return run
        launch.resume(run)
        run.refresh_from_db()


@pytest.mark.parametrize(
    ("model", "config"), [("fake/fewshot", {}), ("fake/rules", OMEGA)], ids=["rfs", "omega"]
)
def test_a_candidate_by_hand_is_scored_and_shown_in_the_lineage(
    client_user, user, demo_dataset, model, config
):
    run = paused_with_scored_candidates(user, demo_dataset, model, **config)
    start = Candidate.objects.filter(run=run).exclude(reward=None).order_by("-reward").first()
    assert "instructions" in start.value
    # The form shows the diff before anything is queued.
    url = reverse("training:hand-candidate", args=[run.pk, start.pk])
    preview = client_user.post(url, {"branch_instructions": HAND, "preview": "1"})
    assert preview.status_code == 200 and 'id="hand-diff"' in preview.content.decode()
    assert not HandCandidate.objects.filter(run=run).exists()
    response = client_user.post(url, {"branch_instructions": HAND})
    assert response.status_code == 302
    entry = HandCandidate.objects.get(run=run)
    assert (entry.number, entry.state, entry.parent, entry.value["instructions"]) == (
        1,
        "queued",
        start.candidate_id,
        HAND,
    )
    run = Run.objects.get(pk=run.pk)
    launch.resume(run)
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    entry = HandCandidate.objects.get(run=run)
    assert entry.state == "added", entry.note
    mine = Candidate.objects.get(run=run, operation="by_hand")
    assert (mine.candidate_id, mine.parent_ids, mine.value["instructions"]) == (
        entry.note,
        [start.candidate_id],
        HAND,
    )
    assert mine.reward is not None and mine.status != "pending"
    page = client_user.get(run.get_absolute_url()).content.decode()
    assert "by hand" in page


def test_only_live_omega_or_random_few_shot_runs_take_one_and_only_their_owner(
    client, client_user, user, other_user, demo_dataset
):
    run = paused_with_scored_candidates(user, demo_dataset, "fake/fewshot")
    start = Candidate.objects.filter(run=run).first()
    with pytest.raises(hand_candidates.HandCandidateError, match="change something"):
        hand_candidates.submit(run, start, Edits(instructions=start.value["instructions"]))
    Run.objects.filter(pk=run.pk).update(status=Run.SUCCEEDED)
    run.refresh_from_db()
    with pytest.raises(
        hand_candidates.HandCandidateError,
        match="paused run whose optimizer takes candidates by hand",
    ):
        hand_candidates.submit(run, start, Edits(instructions=HAND))
    client.force_login(other_user)
    url = reverse("training:hand-candidate", args=[run.pk, start.pk])
    assert client.post(url, {"branch_instructions": HAND}).status_code == 404


def test_a_candidate_by_hand_rewrites_removes_and_adds_examples_checked_against_the_program(
    client_user, user, demo_dataset
):
    run = paused_with_scored_candidates(user, demo_dataset, "fake/fewshot")
    start = next(
        c
        for c in Candidate.objects.filter(run=run).exclude(reward=None).order_by("pk")
        if len(c.value.get("examples") or []) >= 2
    )
    examples = start.value["examples"]
    url = reverse("training:hand-candidate", args=[run.pk, start.pk])
    form = client_user.get(url).content.decode()
    assert 'name="example_0_inputs"' in form and 'id="hand-new-inputs"' in form
    assert html_escape(json.dumps(examples[0]["inputs"], ensure_ascii=False)) in form
    base = {"branch_instructions": start.value["instructions"], "preview": "1"}

    def said(**data):
        page = client_user.post(url, {**base, **data}).content.decode()
        return re.search(r'id="hand-error">([^<]*)<', page).group(1)

    # An example the program could not read is refused, naming it and the field.
    assert "no field &#x27;msg&#x27;" in said(
        new_inputs='{"msg": "x"}', new_outputs='{"team": "box"}'
    )
    assert "The new example&#x27;s outputs: team:" in said(
        new_inputs='{"message": "x"}', new_outputs='{"team": 3}'
    )
    assert "Example 1&#x27;s inputs: not JSON" in said(example_0_inputs="{")
    assert "write a JSON object" in said(new_inputs='{"message": "x"}')
    assert "at most 20000 characters" in said(
        new_inputs=json.dumps({"message": "x" * 20_000}), new_outputs='{"team": "box"}'
    )
    assert not HandCandidate.objects.filter(run=run).exists()

    other = "bug" if examples[0]["outputs"]["team"] != "bug" else "box"
    edits = {
        "example_0_outputs": json.dumps({"team": other}),
        "remove_1": "on",
        "new_inputs": json.dumps({"message": "My parcel never came"}),
        "new_outputs": json.dumps({"team": "box"}),
    }
    preview = client_user.post(url, {**base, **edits}).content.decode()
    diff = re.search(r'id="hand-diff">(.*?)</div>', preview, re.S).group(1)
    assert (
        "My parcel never came" in diff
        and html_escape(json.dumps(examples[1]["inputs"])[1:-1]) in diff
    )
    assert not HandCandidate.objects.filter(run=run).exists()
    assert (
        client_user.post(
            url, {**edits, "branch_instructions": base["branch_instructions"]}
        ).status_code
        == 302
    )
    entry = HandCandidate.objects.get(run=run)
    written = [
        {"inputs": examples[0]["inputs"], "outputs": {"team": other}},
        *examples[2:],
        {"inputs": {"message": "My parcel never came"}, "outputs": {"team": "box"}},
    ]
    assert entry.value["examples"] == written
    launch.resume(run)
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    mine = Candidate.objects.get(run=run, operation="by_hand")
    assert mine.value["examples"] == written and mine.reward is not None
    assert mine.parent_ids == [start.candidate_id]


async def test_the_preview_and_the_engine_measure_a_value_by_hand_alike():
    """One measure (the engine's ``by_hand_size``) and one limit: the dashboard's preview
    takes exactly the values ``Optimizer.add_by_hand`` takes, up to the last character."""
    program = await build_program(few_shot_learner())
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(seed=0),
    )
    optimizer = program.optimizer
    optimizer.trainable_variables = list(program.trainable_variables)
    variable = optimizer.trainable_variables[0]
    start = Candidate(variable=variable.name, value=variable.get_json())

    def padded(size):
        example = {"inputs": {"query": ""}, "outputs": {"answer": "a"}}
        short = by_hand_size({**start.value, "examples": [example]})
        example["inputs"]["query"] = "x" * (size - short)
        return example

    at_limit, over = padded(MAX_BY_HAND_CHARS), padded(MAX_BY_HAND_CHARS + 1)
    value = hand_candidates.preview(start, Edits(added=[at_limit]))
    assert by_hand_size(value) == MAX_BY_HAND_CHARS
    assert optimizer.add_by_hand(variable.name, value)["operation"] == "by_hand"
    with pytest.raises(
        hand_candidates.HandCandidateError, match=f"this one {MAX_BY_HAND_CHARS + 1}"
    ):
        hand_candidates.preview(start, Edits(added=[over]))
    with pytest.raises(ValueError, match=f"at most {MAX_BY_HAND_CHARS} characters"):
        optimizer.add_by_hand(variable.name, {**start.value, "examples": [over]})
