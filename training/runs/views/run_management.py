"""Managing runs and programs: details (name, notes, tags), archive, delete, bulk actions.

Destructive actions ask first without JavaScript: a GET shows a confirm page saying what
goes, its POST form does it (bulk delete: the first POST shows the confirm page, the second,
with ``confirmed``, deletes). Every row is looked up through ``training.runs.selectors`` with the
request's user: another user's run or program is a 404; ids in a bulk form that are not the
user's are left out.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpResponseRedirect, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from training.programs import selectors as program_selectors
from training.runs import run_management as management
from training.runs import selectors

BULK_ACTIONS = ("compare", "archive", "unarchive", "tag", "delete")


def _back_to_list(request) -> HttpResponseRedirect:
    """The runs list with the filters the bulk form carried (``next``: a query string)."""
    query = QueryDict(request.POST.get("next", "")[:2000]).urlencode()  # re-encoded: no raw text
    url = reverse("training:run-list")
    return redirect(f"{url}?{query}" if query else url)


@require_POST
def run_details(request, pk: int):
    run = selectors.owned_run(request.user, pk)
    try:
        management.update_details(
            run,
            name=request.POST.get("name", ""),
            notes=request.POST.get("notes", ""),
            tags=request.POST.get("tags", ""),
        )
    except management.ManagementError as exc:
        messages.error(request, f"Not saved: {exc}.")
    else:
        messages.success(request, "Run details saved.")
    return redirect(run)


@require_POST
def run_archive(request, pk: int):
    run = selectors.owned_run(request.user, pk)
    archived = request.POST.get("archived") == "1"
    management.set_archived([run], archived)
    messages.success(
        request,
        f"{run.display_name} archived: hidden from the runs list unless “show archived” is on."
        if archived
        else f"{run.display_name} is back in the runs list.",
    )
    return redirect(run)


def _delete_once_confirmed(request, target, delete, *, done: str, then: str, page: str, context):
    """GET: the confirmation ``page`` (``context()`` says what would go). POST: ``delete``
    the target and say ``done``, then go to ``then``; a refusal is said on the target's page."""
    if request.method != "POST":
        return render(request, page, context())
    try:
        delete(target)
    except management.ManagementError as exc:
        messages.error(request, str(exc))
        return redirect(target)
    messages.success(request, done)
    return redirect(then)


@require_http_methods(["GET", "POST"])
def run_delete(request, pk: int):
    run = selectors.owned_run(request.user, pk)
    return _delete_once_confirmed(
        request,
        run,
        management.delete_run,
        done=f"Deleted {run.display_name} and everything it produced.",
        then="training:run-list",
        page="training/run_confirm_delete.html",
        context=lambda: {"runs": [run], "contents": selectors.run_contents(run), "single": True},
    )


@require_POST
def runs_bulk(request):
    """The runs list's bulk bar: one form, the button pressed names the action."""
    action = request.POST.get("action", "")
    ids = request.POST.getlist("runs")
    if action not in BULK_ACTIONS:
        messages.error(request, "Unknown action.")
        return _back_to_list(request)
    runs = selectors.owned_runs(request.user, ids)
    if not runs:
        messages.error(request, "Select at least one run first.")
        return _back_to_list(request)
    if action == "compare":
        url = reverse("training:compare")
        return redirect(f"{url}?{urlencode([('runs', run.pk) for run in runs])}")
    if action in ("archive", "unarchive"):
        changed = management.set_archived(runs, action == "archive")
        messages.success(request, f"{action.capitalize()}d {changed} run{'s' * (changed != 1)}.")
        return _back_to_list(request)
    if action == "tag":
        try:
            changed = management.add_tag(runs, request.POST.get("tag", ""))
        except management.ManagementError as exc:
            messages.error(request, f"Not tagged: {exc}.")
        else:
            messages.success(request, f"Tagged {changed} run{'s' * (changed != 1)}.")
        return _back_to_list(request)
    # delete: ask first, then delete what may be deleted and say what was refused
    if request.POST.get("confirmed") != "1":
        return render(
            request,
            "training/run_confirm_delete.html",
            {"runs": runs, "single": False, "next": request.POST.get("next", "")},
        )
    deleted, refused = management.delete_runs(runs)
    if deleted:
        messages.success(request, f"Deleted {len(deleted)} run{'s' * (len(deleted) != 1)}.")
    for refusal in refused:
        messages.error(request, refusal)
    return _back_to_list(request)


@require_http_methods(["GET", "POST"])
def program_delete(request, pk: int):
    program = program_selectors.owned_program(request.user, pk)
    return _delete_once_confirmed(
        request,
        program,
        management.delete_program,
        done=f"Deleted program “{program.name}” and its versions.",
        then="training:program-list",
        page="training/program_confirm_delete.html",
        context=lambda: {
            "program": program,
            "refusal": management.program_in_use(program),
            "versions": program_selectors.versions_of(program),
        },
    )
