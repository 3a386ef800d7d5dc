"""The run page's "Use this one" button (``training.runs.candidate_versions``)."""

from __future__ import annotations

from django.contrib import messages
from django.views.decorators.http import require_POST

from core.redirects import page_redirect
from training.runs import candidate_versions, selectors


@require_POST
def candidate_use(request, pk: int, candidate_pk: int):
    run = selectors.owned_run(request.user, pk)
    candidate = selectors.run_candidate(run, candidate_pk)
    try:
        version = candidate_versions.save_candidate(run, candidate)
    except candidate_versions.CandidateVersionError as exc:
        messages.error(request, str(exc))
        return page_redirect(request, run.get_absolute_url())
    messages.success(
        request,
        f"Saved candidate {candidate.candidate_id} of run #{run.pk} as version "
        f"{version.number} of “{run.program.name}”.",
    )
    return page_redirect(request, version.get_absolute_url())
