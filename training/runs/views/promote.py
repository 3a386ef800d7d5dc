"""Promote a finished run: its trained program becomes the next version of its program
(``training.programs.program_versions.promote``)."""

from __future__ import annotations

from django.contrib import messages
from django.views.decorators.http import require_POST

from core.redirects import page_redirect
from training.programs import program_versions
from training.runs import selectors


@require_POST
def run_promote(request, pk: int):
    run = selectors.owned_run(request.user, pk)
    try:
        version = program_versions.promote(run)
    except program_versions.PromoteError as exc:
        messages.error(request, str(exc))
        target = run.get_absolute_url()
    else:
        messages.success(
            request,
            f"Saved run #{run.pk}'s trained program as version {version.number} of "
            f"“{run.program.name}”.",
        )
        target = version.get_absolute_url()
    return page_redirect(request, target)  # the button sits in the live actions fragment
