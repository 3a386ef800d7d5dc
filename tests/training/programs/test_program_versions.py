"""Program versions: version 1 as created, "Save as new program version" from a finished run,
the program page per version, launching from a version, diffing two, owners only."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.training.conftest import run_config
from tests.training.test_views import launch_data
from training.execution import attempt as execution
from training.models import ProgramVersion, Run
from training.programs import program_versions
from training.programs.programs import program_from_json
from training.runs import run_management

EXAMPLES = [
    {"inputs": {"message": "The app crashes on start"}, "outputs": {"team": "bug"}},
    {"inputs": {"message": "Please add dark mode"}, "outputs": {"team": "feature"}},
]


def trained_json(program, instructions="Route it to a team.", examples=EXAMPLES) -> dict:
    """The program's engine JSON with its variable trained (as a run's fit leaves it)."""
    engine = program_from_json(program.engine_json)
    (name,) = engine.get_variables()
    engine.set_variables({name: {"instructions": instructions, "examples": examples}})
    return engine.get_config()


def succeeded_run(user, program, dataset, **fields) -> Run:
    fields.setdefault("trained_program_json", trained_json(program))
    fields.setdefault("status", Run.SUCCEEDED)
    return Run.objects.create(
        owner=user,
        program=program,
        dataset=dataset,
        config=run_config(),
        baseline_reward=0.25,
        final_reward=0.75,
        **fields,
    )


@pytest.mark.django_db
def test_a_new_program_is_its_own_version_1(program):
    (version,) = ProgramVersion.objects.filter(program=program)
    assert version.number == 1 and version.engine_json == program.engine_json
    assert version.source_run is None and version.parent is None


@pytest.mark.django_db
def test_promote_saves_the_trained_program_with_its_lineage(
    client_user, user, program, demo_dataset
):
    run = succeeded_run(user, program, demo_dataset)
    response = client_user.post(reverse("training:run-promote", args=[run.pk]))
    version = ProgramVersion.objects.get(program=program, number=2)
    assert response["Location"] == f"{program.get_absolute_url()}?version=2"
    assert version.engine_json == run.trained_program_json
    assert version.source_run == run and version.source_run_number == run.pk
    assert version.parent.number == 1
    assert (version.baseline_reward, version.test_reward) == (0.25, 0.75)
    program.refresh_from_db()
    assert program.engine_json == ProgramVersion.objects.get(program=program, number=1).engine_json

    # The program page shows the latest version's examples, not "0 examples".
    page = client_user.get(program.get_absolute_url()).content.decode()
    assert "Variables of version 2" in page and "<p>2 examples</p>" in page
    assert '<td class="version-reward">0.250 → 0.750</td>' in page
    assert f"run #{run.pk}</a>" in page and "trained from v1" in page
    first = client_user.get(program.get_absolute_url(), {"version": "1"}).content.decode()
    assert "Variables of version 1" in first and "<p>0 examples</p>" in first
    assert client_user.get(program.get_absolute_url(), {"version": "9"}).status_code == 404
    # The run page now links to its version instead of offering the button again.
    run_page = client_user.get(run.get_absolute_url()).content.decode()
    assert 'id="promoted-link"' in run_page and 'id="promote-run"' not in run_page
    # The export of a version is that version's JSON.
    exported = client_user.get(
        reverse("training:program-export", args=[program.pk]), {"version": "2"}
    )
    assert exported.json() == run.trained_program_json


@pytest.mark.django_db
def test_promote_refuses_unfinished_and_repeated(client_user, user, program, demo_dataset):
    failed = succeeded_run(user, program, demo_dataset, status=Run.FAILED)
    with pytest.raises(program_versions.PromoteError, match="run #\\d+ is failed"):
        program_versions.promote(failed)
    run = succeeded_run(user, program, demo_dataset)
    assert program_versions.promote(run).number == 2
    response = client_user.post(reverse("training:run-promote", args=[run.pk]), follow=True)
    assert f"Run #{run.pk} is already saved as version 2 of “Router”." in (
        response.content.decode()
    )
    second = succeeded_run(user, program, demo_dataset)
    assert program_versions.promote(second).number == 3


@pytest.mark.django_db
def test_a_version_outlives_its_run(client_user, user, program, demo_dataset):
    run = succeeded_run(user, program, demo_dataset)
    version = program_versions.promote(run)
    run_management.delete_run(run)
    version.refresh_from_db()
    assert version.source_run is None and version.source_run_number == run.pk
    page = client_user.get(program.get_absolute_url()).content.decode()
    assert f'run #{run.pk} <small class="muted">(deleted)</small>' in page


@pytest.mark.django_db
def test_diff_two_versions(client_user, user, program, demo_dataset):
    program_versions.promote(succeeded_run(user, program, demo_dataset))
    response = client_user.get(
        reverse("training:program-version-diff", args=[program.pk]), {"a": "1", "b": "2"}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert '<span class="diff-file">--- version 1</span>' in html
    assert '<span class="diff-del">-Route it.</span>' in html
    assert '<span class="diff-add">+Route it to a team.</span>' in html
    assert "Please add dark mode" in html
    response = client_user.get(
        reverse("training:program-version-diff", args=[program.pk]),
        {"a": "1", "b": "7"},
        follow=True,
    )
    assert "Pick two versions of this program to compare." in response.content.decode()


@pytest.mark.django_db
def test_others_cannot_promote_see_or_diff_versions(
    client, user, other_user, program, demo_dataset
):
    run = succeeded_run(user, program, demo_dataset)
    client.force_login(other_user)
    assert client.post(reverse("training:run-promote", args=[run.pk])).status_code == 404
    assert not ProgramVersion.objects.filter(program=program, number=2).exists()
    diff = reverse("training:program-version-diff", args=[program.pk])
    assert client.get(diff, {"a": "1", "b": "1"}).status_code == 404
    response = client.post(
        reverse("training:run-create"), launch_data(program, demo_dataset, version="1")
    )
    assert "program" in response.context["form"].errors


@pytest.mark.django_db
def test_launch_form_takes_a_version_and_refuses_an_unknown_one(
    client_user, user, program, demo_dataset, monkeypatch
):
    monkeypatch.setattr(
        "training.execution.tasks.execute_run.apply_async",
        lambda args, **options: type("R", (), {"id": "t1"})(),
    )
    program_versions.promote(succeeded_run(user, program, demo_dataset))
    form = client_user.get(reverse("training:run-create"), {"program": program.pk, "version": 2})
    assert form.context["form"]["version"].value() == 2
    response = client_user.post(
        reverse("training:run-create"), launch_data(program, demo_dataset, version="5")
    )
    assert response.context["form"].errors["version"] == ["“Router” has no version 5."]
    client_user.post(
        reverse("training:run-create"), launch_data(program, demo_dataset, version="1")
    )
    client_user.post(reverse("training:run-create"), launch_data(program, demo_dataset))
    launched = Run.objects.filter(status=Run.QUEUED).order_by("pk")
    assert [run.program_version.number for run in launched] == [1, 2]  # blank: the latest


@pytest.mark.django_db(transaction=True)
def test_a_run_launched_from_a_promoted_version_trains_that_version(
    user, program, demo_dataset, monkeypatch
):
    from training.runs import launch as runs

    # Executed here, in-process: nothing goes to the broker.
    monkeypatch.setattr(
        "training.execution.tasks.execute_run.apply_async",
        lambda args, **options: type("R", (), {"id": "t1"})(),
    )

    first = runs.launch(user, program, demo_dataset, run_config(evaluations_before=1))
    assert first.program_version.number == 1
    assert execution.execute(first.pk, first.attempt) == Run.SUCCEEDED
    first.refresh_from_db()
    assert first.baseline_reward == 0.0 and first.final_reward > 0.0  # fewshot learnt examples

    version = program_versions.promote(first)
    assert version.test_reward == first.final_reward
    engine = program_from_json(version.engine_json)
    assert engine.get_variables()["generator/state"]["examples"]

    config = run_config(evaluations_before=1, epochs=1)
    second = runs.launch(user, program, demo_dataset, config, version=version)
    assert execution.execute(second.pk, second.attempt) == Run.SUCCEEDED
    second.refresh_from_db()
    # It started from the trained examples: scored before any training of its own.
    assert second.baseline_reward == first.final_reward


def test_a_retrieval_versions_examples_are_its_pool_not_zero():
    """A NearestFewShot or CalibratedLabels program's examples are its retrieval pool: the
    version list says "4 nearest of 3 pooled", not "0 examples"."""
    from types import SimpleNamespace

    from django.template.loader import render_to_string

    from training.programs.program_versions import summary_of

    pool = [{"inputs": {"m": str(i)}, "outputs": {"team": "bug"}} for i in range(3)]
    document = {
        "variables": {
            "gen/state": {"value": {"examples": [], "retrieval": {"pool": pool, "k": 4}}},
            "judge/state": {"value": {"examples": [{"a": 1}], "decision": {"field": "team"}}},
        }
    }
    rows = summary_of(SimpleNamespace(engine_json=document))
    assert [(r["name"], r["examples"], r["pooled"], r["nearest"]) for r in rows] == [
        ("gen/state", 0, 3, 4),
        ("judge/state", 1, 0, None),
    ]
    version = SimpleNamespace(number=2, variable_rows=rows)
    html = render_to_string(
        "training/partials/program_versions.html", {"versions": [version], "program": None}
    )
    shown = re.findall(r'<span class="version-examples">([^<]*)</span>', html)
    assert shown == ["4 nearest of 3 pooled examples", "1 example, a learned label decision"]
