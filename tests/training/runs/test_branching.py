"""Branching: the prefilled branch form, edits and pins, the branch run's lineage, the
runs tree, and owner-only access (run in-process on the scripted fake LM)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.urls import reverse

from tests.training.conftest import run_config
from training.execution import attempt as execution
from training.models import Candidate, Program, Run
from training.programs.programs import program_from_json
from training.runs import branching, run_tree

pytestmark = pytest.mark.django_db(transaction=True)


def finished_run(user, program, dataset, **overrides):
    run = Run.objects.create(
        owner=user,
        program=program,
        dataset=dataset,
        config=run_config(evaluations_before=1, evaluations_after=1, **overrides),
    )
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    return run


def candidate_with_examples(run, at_least=2):
    for candidate in Candidate.objects.filter(run=run).order_by("id"):
        if len((candidate.value or {}).get("examples") or []) >= at_least:
            return candidate
    raise AssertionError("no candidate with examples")


def test_branch_form_is_prefilled_and_launches_an_edited_pinned_branch(
    client_user, user, program, demo_dataset, no_broker
):
    run = finished_run(user, program, demo_dataset, rfs_nb_min_examples=2, epochs=1)
    source = candidate_with_examples(run)
    url = reverse("training:candidate-branch", args=[run.pk, source.pk])
    page = client_user.get(url)
    assert page.status_code == 200
    form = page.context["form"]
    assert form["epochs"].value() == 1 and form["seed"].value() == run.config["seed"]
    assert form["rfs_nb_min_examples"].value() == 2
    assert form["branch_instructions"].value() == source.value["instructions"]
    data = {
        name: value
        for name in form.fields
        if (value := form[name].value()) not in (None, "", False, [])
    }
    data.update(
        branch_instructions="Answer with the team's code <b>only</b>.",
        example_0="pin",
        example_1="remove",
        dataset=demo_dataset.pk,
        metrics=["F1Score"],
    )
    response = client_user.post(url, data)
    assert response.status_code == 302, response.context["form"].errors
    branch = Run.objects.get(parent_run=run)
    assert response["Location"] == branch.get_absolute_url()
    assert branch.parent_candidate == source and no_broker == [[branch.pk, 1]]
    assert branch.config["epochs"] == 1 and branch.config["seed"] == run.config["seed"]
    assert branch.program.source == Program.SOURCE_BRANCH and branch.program.pk != program.pk
    (state,) = program_from_json(branch.program.engine_json).variables
    pinned = source.value["examples"][0]
    assert state.value["instructions"] == "Answer with the team's code <b>only</b>."
    assert state.value["examples"] == [pinned] + source.value["examples"][2:]
    assert state.pinned_examples == [pinned] and state.candidates == []
    # The branch trains: every candidate it proposes keeps the pinned example.
    assert execution.execute(branch.pk, branch.attempt) == Run.SUCCEEDED
    values = list(Candidate.objects.filter(run=branch).values_list("value", flat=True))
    assert len(values) >= 2
    assert all(value["examples"][0] == pinned for value in values)
    # The run pages link both ways, and the instructions render as text.
    parent_page = client_user.get(reverse("training:run-detail", args=[run.pk])).content.decode()
    assert f'href="/runs/{branch.pk}/"' in parent_page
    branch_page = client_user.get(branch.get_absolute_url()).content.decode()
    assert "Branch of" in branch_page
    program_page = client_user.get(branch.program.get_absolute_url()).content.decode()
    assert "<b>only</b>" not in program_page and "&lt;b&gt;only&lt;/b&gt;" in program_page


def test_branch_from_best_uses_the_runs_best_candidate(client_user, user, program, demo_dataset):
    run = finished_run(user, program, demo_dataset, epochs=1)
    page = client_user.get(reverse("training:run-branch", args=[run.pk]))
    assert page.status_code == 200
    assert page.context["candidate"] == Candidate.objects.get(run=run, status="best")


def test_bad_edits_are_refused_with_a_message(user, program, demo_dataset):
    run = finished_run(user, program, demo_dataset, epochs=1)
    source = Candidate.objects.filter(run=run).first()
    with pytest.raises(branching.BranchError, match="kept, pinned or removed"):
        branching.branch_document(run, source, branching.Edits(examples=["burn"]))
    long = "x" * (branching.MAX_INSTRUCTIONS_CHARS + 1)
    with pytest.raises(branching.BranchError, match="at most"):
        branching.branch_document(run, source, branching.Edits(instructions=long))


def test_others_cannot_branch_or_see_the_form(
    client, user, other_user, program, demo_dataset, no_broker
):
    run = finished_run(user, program, demo_dataset, epochs=1)
    source = Candidate.objects.filter(run=run).first()
    client.force_login(other_user)
    for url in (
        reverse("training:run-branch", args=[run.pk]),
        reverse("training:candidate-branch", args=[run.pk, source.pk]),
    ):
        assert client.get(url).status_code == 404
        assert client.post(url, {"dataset": demo_dataset.pk}).status_code == 404
    assert not Run.objects.filter(parent_run=run).exists() and no_broker == []
    # A candidate of another run under this run's URL is a 404 for the owner too.
    client.force_login(user)
    other_run = finished_run(user, program, demo_dataset, epochs=1)
    foreign = Candidate.objects.filter(run=other_run).first()
    assert (
        client.get(reverse("training:candidate-branch", args=[run.pk, foreign.pk])).status_code
        == 404
    )


def test_runs_list_and_compare_show_branches_as_a_tree(client_user, user, program, demo_dataset):
    root = Run.objects.create(
        owner=user, program=program, dataset=demo_dataset, config=run_config()
    )
    other = Run.objects.create(
        owner=user, program=program, dataset=demo_dataset, config=run_config()
    )
    child = Run.objects.create(
        owner=user, program=program, dataset=demo_dataset, config=run_config(), parent_run=root
    )
    grandchild = Run.objects.create(
        owner=user, program=program, dataset=demo_dataset, config=run_config(), parent_run=child
    )
    listed = client_user.get(reverse("training:run-list")).context["runs"]
    order = [run.pk for run in listed]
    assert order.index(child.pk) == order.index(root.pk) + 1
    assert order.index(grandchild.pk) == order.index(child.pk) + 1
    assert [run.branch_depth for run in listed if run.pk in (root.pk, child.pk, grandchild.pk)] == [
        0,
        1,
        2,
    ]
    compare = client_user.get(
        reverse("training:compare"), {"runs": [grandchild.pk, other.pk, root.pk, child.pk]}
    )
    tree = compare.content.decode().split('id="run-tree"')[1].split("</section>")[0]
    items = tree.split("<li ")[1:]
    depths = {
        int(item.split('data-run="')[1].split('"')[0]): item.split("branch-depth-")[1][0]
        for item in items
    }
    assert depths == {root.pk: "0", child.pk: "1", grandchild.pk: "2", other.pk: "0"}
    positions = [int(item.split('data-run="')[1].split('"')[0]) for item in items]
    assert positions.index(grandchild.pk) == positions.index(child.pk) + 1
    assert positions.index(child.pk) == positions.index(root.pk) + 1


def test_as_tree_keeps_the_order_of_roots_and_never_loops():
    runs = [
        SimpleNamespace(pk=pk, parent_run_id=parent)
        for pk, parent in [(5, None), (4, 1), (3, 5), (2, 3), (1, None), (7, 8), (8, 7)]
    ]
    tree = run_tree.as_tree(runs)
    assert [(run.pk, run.branch_depth) for run in tree] == [
        (5, 0),
        (3, 1),
        (2, 2),
        (1, 0),
        (4, 1),
        (7, 0),
        (8, 1),
    ]


def test_branch_from_best_before_any_candidate_says_so(client_user, user, program, demo_dataset):
    run = Run.objects.create(owner=user, program=program, dataset=demo_dataset, config=run_config())
    response = client_user.get(reverse("training:run-branch", args=[run.pk]), follow=True)
    assert response.redirect_chain == [(run.get_absolute_url(), 302)]
    assert "no scored candidate to branch from yet" in response.content.decode()
