"""A run's trained program as plain prompts (``training.insight.plain_prompt_parity``): the
page part with its download, and the parity check a worker runs (a re-score job,
``rescore_jobs.ask_parity``), polled until it is done.
"""

from __future__ import annotations

import json

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from training.insight import plain_prompt_parity, rescore_jobs
from training.runs import selectors

TEMPLATE = "training/partials/run_plain_prompts.html"


def _context(run, job=None, error: str = "") -> dict:
    return {
        "run": run,
        "offered": plain_prompt_parity.offered(run),
        "parity_job": job,
        "parity": job.result if job is not None and job.status == job.DONE else None,
        "parity_error": error,
    }


@require_GET
@never_cache
def run_plain_prompts(request, pk: int):
    """The part: the download and the latest parity check (or its button)."""
    run = selectors.owned_run(request.user, pk)
    return render(request, TEMPLATE, _context(run, rescore_jobs.latest_parity(run)))


@require_GET
def run_plain_prompts_json(request, pk: int):
    """The export as a file."""
    run = selectors.owned_run(request.user, pk)
    try:
        export = plain_prompt_parity.export_of(run)
    except plain_prompt_parity.ParityError as exc:
        raise Http404(str(exc)) from None
    response = HttpResponse(
        json.dumps(export, indent=2, ensure_ascii=False), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-plain-prompts.json"'
    return response


@require_POST
def run_parity(request, pk: int):
    """ "Check parity": the re-score from the export goes to a worker; the part polls it."""
    run = selectors.owned_run(request.user, pk)
    try:
        job = rescore_jobs.ask_parity(run)
    except plain_prompt_parity.ParityError as exc:
        return render(request, TEMPLATE, _context(run, error=str(exc)))
    return render(request, TEMPLATE, _context(run, job))


@require_GET
@never_cache
def run_parity_job(request, pk: int, job_id: int):
    """A parity check's state; once done, the export's score beside the run's own."""
    run = selectors.owned_run(request.user, pk)
    job = rescore_jobs.owned_job(run, job_id)
    if job is None or (job.spec or {}).get("kind") != plain_prompt_parity.KIND:
        raise Http404("No such parity check.")
    return render(request, TEMPLATE, _context(run, job))
