"""Program versions: pick the version a program page shows, diff two (promoting a run to a
version is ``training.runs.views.promote``).

The program page (``programs.views.programs.program_detail``) shows one version at a time
(``?version=N``, default: the latest) through ``version_context``; its launch links carry the
version to the launch form.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from training.programs import program_versions, selectors


def version_context(request, program) -> dict:
    """The program page's versions: the list (each with its variables' summary) and the
    version shown (``?version=N``; an unknown number is a 404, blank the latest)."""
    versions = selectors.versions_of(program)
    for version in versions:
        version.variable_rows = program_versions.summary_of(version)
    wanted = request.GET.get("version", "")
    if wanted:
        shown = next((v for v in versions if str(v.number) == wanted), None)
        if shown is None:
            raise Http404("No such version.")
    else:
        shown = versions[0] if versions else None
    return {"versions": versions, "version": shown}


@require_GET
def version_diff(request, pk: int):
    program = selectors.owned_program(request.user, pk)
    old = selectors.version_of(program, request.GET.get("a"))
    new = selectors.version_of(program, request.GET.get("b"))
    if old is None or new is None:
        messages.error(request, "Pick two versions of this program to compare.")
        return redirect(program)
    context = {"program": program, **program_versions.compare(old, new)}
    context["versions"] = selectors.versions_of(program)
    return render(request, "training/program_version_diff.html", context)
