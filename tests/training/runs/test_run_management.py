"""Managing runs and programs: delete (with what a run produced), archive, rename, tags,
notes, bulk actions, the runs list's tag and archive filters, and owners only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from datasets.services import DatasetInUse, delete_dataset
from tests.training.conftest import make_program, run_config
from training.insight.plots import plot_dir
from training.models import (
    Candidate,
    EpochLog,
    Evaluation,
    LMCallTrace,
    OptimizerError,
    Program,
    ProgramVersion,
    Run,
    RunTag,
)
from training.runs import run_management, selectors

pytestmark = pytest.mark.django_db


def finished_run(user, program, dataset, status=Run.SUCCEEDED, **fields) -> Run:
    """A finished run with one row of everything a run produces."""
    run = Run.objects.create(
        owner=user, program=program, dataset=dataset, config=run_config(), status=status, **fields
    )
    EpochLog.objects.create(run=run, epoch=0, logs={"reward": 0.5})
    Candidate.objects.create(
        run=run,
        variable="generator/state",
        candidate_id="c1",
        operation="seed",
        value={},
        status="best",
    )
    Evaluation.objects.create(run=run, phase="before", index=0, metrics={"reward": 0.1})
    LMCallTrace.objects.create(run=run, seq=1, role="prediction", kind="completion", model="m")
    OptimizerError.objects.create(run=run, epoch=0, error="boom")
    RunTag.objects.create(run=run, name="baseline")
    return run


def test_deleting_a_run_takes_what_it_produced_and_frees_its_dataset(
    user, program, demo_dataset, django_capture_on_commit_callbacks
):
    run = finished_run(user, program, demo_dataset)
    folder = plot_dir(run)
    (folder / "history.png").write_bytes(b"png")
    with pytest.raises(DatasetInUse, match=r"Delete those runs first"):
        delete_dataset(demo_dataset)

    with django_capture_on_commit_callbacks(execute=True):
        run_management.delete_run(run)

    assert not Run.objects.filter(pk=run.pk).exists()
    for model in (EpochLog, Candidate, Evaluation, LMCallTrace, OptimizerError, RunTag):
        assert not model.objects.filter(run_id=run.pk).exists(), model.__name__
    assert not folder.exists()
    # the program is still there (and its dataset link), and the dataset can go now
    program.refresh_from_db()
    delete_dataset(demo_dataset)
    program.refresh_from_db()
    assert program.dataset is None


@pytest.mark.parametrize("status", [Run.QUEUED, Run.RUNNING])
def test_a_queued_or_running_run_must_be_cancelled_first(
    client_user, user, program, demo_dataset, status
):
    run = finished_run(user, program, demo_dataset, status=status)
    with pytest.raises(run_management.ManagementError) as caught:
        run_management.delete_run(run)
    assert str(caught.value) == (f"Run #{run.pk} is {status}: cancel it first, then delete it.")
    page = client_user.get(reverse("training:run-delete", args=[run.pk])).content.decode()
    assert "Cancel the run before deleting it." in page and "confirm-delete-button" not in page
    response = client_user.post(reverse("training:run-delete", args=[run.pk]), follow=True)
    assert "cancel it first, then delete it" in response.content.decode()
    assert Run.objects.filter(pk=run.pk).exists()


def test_delete_asks_first_then_deletes(client_user, user, program, demo_dataset):
    run = finished_run(user, program, demo_dataset)
    page = client_user.get(reverse("training:run-delete", args=[run.pk])).content.decode()
    assert "1 epoch logs, 1 candidates, 1 evaluations, 1 LM call traces, 1 optimizer errors" in page
    assert Run.objects.filter(pk=run.pk).exists()  # a GET deletes nothing
    response = client_user.post(reverse("training:run-delete", args=[run.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("training:run-list")
    assert not Run.objects.filter(pk=run.pk).exists()


def test_deleting_a_program_is_refused_while_runs_use_it_naming_them(
    client_user, user, program, demo_dataset
):
    runs = [finished_run(user, program, demo_dataset) for _ in range(2)]
    expected = (
        f"“Router” cannot be deleted: 2 runs use it (#{runs[1].pk}, #{runs[0].pk}). "
        "Delete those runs first."
    )
    page = client_user.get(reverse("training:program-delete", args=[program.pk])).content.decode()
    assert expected in page
    response = client_user.post(reverse("training:program-delete", args=[program.pk]), follow=True)
    assert expected in response.content.decode()
    assert Program.objects.filter(pk=program.pk).exists()

    run_management.delete_runs(runs)
    response = client_user.post(reverse("training:program-delete", args=[program.pk]))
    assert response["Location"] == reverse("training:program-list")
    assert not Program.objects.filter(pk=program.pk).exists()
    assert not ProgramVersion.objects.filter(program_id=program.pk).exists()


def test_others_cannot_delete_rename_archive_or_tag(
    client, user, other_user, program, demo_dataset
):
    run = finished_run(user, program, demo_dataset)
    client.force_login(other_user)
    for name in ("run-delete", "run-details", "run-archive"):
        assert (
            client.post(reverse(f"training:{name}", args=[run.pk]), {"name": "x"}).status_code
            == 404
        )
    assert client.get(reverse("training:run-delete", args=[run.pk])).status_code == 404
    assert client.get(reverse("training:program-delete", args=[program.pk])).status_code == 404
    assert client.post(reverse("training:program-delete", args=[program.pk])).status_code == 404
    for action in ("delete", "archive", "tag"):
        client.post(
            reverse("training:runs-bulk"),
            {"action": action, "runs": [run.pk], "confirmed": "1", "tag": "mine"},
        )
    run.refresh_from_db()
    assert run.name == "" and not run.archived and run.tag_names == ["baseline"]
    assert Program.objects.filter(pk=program.pk).exists()


def test_rename_tag_and_write_notes(client_user, user, program, demo_dataset):
    run = finished_run(user, program, demo_dataset)
    response = client_user.post(
        reverse("training:run-details", args=[run.pk]),
        {"name": "  first   try ", "tags": "rfs, keep, RFS, ", "notes": "<b>seed 7</b>"},
        follow=True,
    )
    run.refresh_from_db()
    assert run.name == "first try" and run.notes == "<b>seed 7</b>"
    assert sorted(run.tag_names) == ["keep", "rfs"]
    html = response.content.decode()
    assert "first try" in html and "&lt;b&gt;seed 7&lt;/b&gt;" in html and "<b>seed 7" not in html
    response = client_user.post(
        reverse("training:run-details", args=[run.pk]),
        {"name": "x", "tags": "ok, <script>", "notes": ""},
        follow=True,
    )
    assert "may only hold letters, digits, spaces" in response.content.decode()
    run.refresh_from_db()
    assert run.name == "first try"  # nothing saved


def test_tag_rules():
    assert run_management.parse_tags(" a b ,  a B, c-1 ") == ["a b", "c-1"]
    with pytest.raises(run_management.ManagementError, match="longer than 40 characters"):
        run_management.parse_tags("x" * 41)
    with pytest.raises(run_management.ManagementError, match="at most 20 tags"):
        run_management.parse_tags(",".join(f"t{i}" for i in range(21)))


def test_archived_runs_leave_the_list_unless_asked_for(client_user, user, program, demo_dataset):
    kept, archived = (finished_run(user, program, demo_dataset) for _ in range(2))
    client_user.post(reverse("training:run-archive", args=[archived.pk]), {"archived": "1"})
    listed = [r.pk for r in client_user.get(reverse("training:run-list")).context["runs"]]
    assert listed == [kept.pk]
    response = client_user.get(reverse("training:run-list"), {"archived": "1"})
    assert [r.pk for r in response.context["runs"]] == [archived.pk, kept.pk]
    assert 'class="tag tag-archived">archived' in response.content.decode()
    client_user.post(reverse("training:run-archive", args=[archived.pk]), {"archived": "0"})
    assert len(client_user.get(reverse("training:run-list")).context["runs"]) == 2


def test_bulk_tag_archive_and_tag_filter(client_user, user, program, demo_dataset):
    a, b, c = (finished_run(user, program, demo_dataset) for _ in range(3))
    bulk = reverse("training:runs-bulk")
    response = client_user.post(
        bulk, {"action": "tag", "runs": [a.pk, b.pk], "tag": "sweep 1", "next": "status=succeeded"}
    )
    assert response["Location"] == reverse("training:run-list") + "?status=succeeded"
    response = client_user.get(reverse("training:run-list"), {"tag": "sweep 1"})
    assert [r.pk for r in response.context["runs"]] == [b.pk, a.pk]
    assert "sweep 1" in response.context["tags"]
    client_user.post(bulk, {"action": "archive", "runs": [a.pk, c.pk]})
    assert [r.pk for r in client_user.get(reverse("training:run-list")).context["runs"]] == [b.pk]
    client_user.post(bulk, {"action": "unarchive", "runs": [a.pk]})
    assert Run.objects.get(pk=a.pk).archived is False and Run.objects.get(pk=c.pk).archived


def test_bulk_delete_confirms_then_deletes_all_but_active_runs(
    client_user, user, other_user, program, demo_dataset
):
    done = finished_run(user, program, demo_dataset)
    failed = finished_run(user, program, demo_dataset, status=Run.FAILED)
    running = finished_run(user, program, demo_dataset, status=Run.RUNNING)
    theirs = finished_run(other_user, make_program(other_user, demo_dataset), demo_dataset)
    ids = [done.pk, failed.pk, running.pk, theirs.pk]
    bulk = reverse("training:runs-bulk")
    page = client_user.post(bulk, {"action": "delete", "runs": ids})
    assert page.status_code == 200 and "Delete 3 runs" in page.content.decode()
    assert Run.objects.count() == 4  # asked, not deleted
    response = client_user.post(
        bulk, {"action": "delete", "runs": ids, "confirmed": "1"}, follow=True
    )
    html = response.content.decode()
    assert "Deleted 2 runs." in html and f"Run #{running.pk} is running: cancel it first" in html
    assert sorted(Run.objects.values_list("pk", flat=True)) == sorted([running.pk, theirs.pk])


def test_bulk_compare_goes_to_the_compare_page(client_user, user, program, demo_dataset):
    a, b = (finished_run(user, program, demo_dataset) for _ in range(2))
    response = client_user.post(
        reverse("training:runs-bulk"), {"action": "compare", "runs": [b.pk, a.pk]}
    )
    assert response["Location"] == f"{reverse('training:compare')}?runs={a.pk}&runs={b.pk}"
    response = client_user.post(reverse("training:runs-bulk"), {"action": "compare"}, follow=True)
    assert "Select at least one run first." in response.content.decode()


def test_runs_list_query_lives_in_selectors(user, program, demo_dataset):
    run = finished_run(user, program, demo_dataset, name="needle")
    runs, applied = selectors.runs_for(user, {"q": "needl", "sort": "-calls"})
    assert [r.pk for r in runs] == [run.pk] and applied == {"q": "needl", "sort": "-calls"}
    assert "calls" in selectors.SORTS
