"""The run page: its first render, the poll of its status, Cancel and Pause (answered 204:
the live stream brings what they changed), and a candidate's page.

GET views only read: a run whose worker died is failed by the reaper
(``manage.py reap_runs``, see ``training.execution.liveness.reaper``), never by a page view.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from core.redirects import page_redirect
from training.insight import live
from training.insight.trace_reads import candidate_trace_counts
from training.programs import candidate_diff
from training.runs import launch as run_services
from training.runs import selectors
from training.runs.views.runs import owned_run


@require_GET
def run_detail(request, pk: int):
    run = owned_run(request, pk)
    context = live.page_context(run, request.GET)
    context["config_json"] = json.dumps(run.config, indent=2)
    return render(request, "training/run_detail.html", context)


@require_GET
@never_cache
def run_poll(request, pk: int):
    """Polled every few seconds while a run is active: the status and actions as stored.

    The live stream is the WebSocket; this is the safety net for a status nothing streamed,
    such as "failed: worker lost", which the reaper writes when a worker died without a word.
    """
    run = owned_run(request, pk)
    return HttpResponse(live.render_parts(run, ("status", "actions"), oob=True))


@require_POST
def run_cancel(request, pk: int):
    """Cancel; an htmx request is answered 204: the page learns the new status from its live
    stream (``request_cancel`` broadcasts it; the 10 s poll heals a page without a socket).

    Why not the fragments, out of band: the stream's copy often arrived first and replaced
    ``#run-actions`` with the Cancel button in it, and htmx then looked for the response's
    targets under that detached button (console: ``htmx:oobErrorNoTarget #run-status``).
    """
    run = run_services.request_cancel(owned_run(request, pk))
    if request.htmx:
        return HttpResponse(status=204)
    return redirect(run)


@require_POST
def run_pause(request, pk: int):
    """Pause: the worker stops after the current batch and frees its slot; answered like
    Cancel (204 to htmx). A run that cannot pause says why."""
    run = owned_run(request, pk)
    try:
        run = run_services.request_pause(run)
    except run_services.PauseError as exc:
        messages.error(request, str(exc))
        return page_redirect(request, run)
    if request.htmx:
        return HttpResponse(status=204)
    return redirect(run)


@require_GET
def candidate_detail(request, pk: int, candidate_pk: int):
    run = owned_run(request, pk)
    candidate = selectors.run_candidate(run, candidate_pk)
    context = {
        "run": run,
        **candidate_diff.describe(candidate),
        "trace_counts": candidate_trace_counts(run, candidate.candidate_id),
    }
    return render(request, "training/candidate_detail.html", context)
