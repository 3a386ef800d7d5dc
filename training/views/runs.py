"""Runs: list (filter + sort), launch, the live run page, cancel, resume, candidates.

GET views only read: a run whose worker died is failed by the reaper
(``manage.py reap_runs``, see ``training.services.reaper``), never by a page view.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.redirects import page_redirect
from datasets import selectors as dataset_selectors
from training import selectors
from training.forms import RunForm
from training.models import Run
from training.selectors_eval_table import table_context
from training.selectors_traces import candidate_trace_counts, trace_summary
from training.services import candidate_diff, live, run_tree
from training.services import runs as run_services
from training.services.run_config import PRESETS


def owned_run(request, pk: int) -> Run:
    return selectors.owned_run(request.user, pk)


@require_GET
def run_list(request):
    runs, applied = selectors.runs_for(request.user, request.GET)
    runs = run_tree.as_tree(runs)  # branches under the run they came from
    return render(
        request,
        "training/run_list.html",
        {
            "runs": runs,
            "applied": applied,
            "statuses": Run.STATUS_CHOICES,
            "sorts": selectors.SORTS,
            "tags": selectors.tags_of(request.user),
            "programs": selectors.program_choices(request.user),
            "datasets": dataset_selectors.dataset_choices(request.user),
        },
    )


@require_http_methods(["GET", "POST"])
def run_create(request):
    initial = {}
    program_id = request.GET.get("program", "")
    if program_id.isdigit():
        program = selectors.owned_program_or_none(request.user, int(program_id))
        if program is not None:
            initial = {"program": program.pk, "dataset": program.dataset_id}
            version = request.GET.get("version", "")
            initial["version"] = int(version) if version.isdigit() else None
    preset = PRESETS.get(request.GET.get("preset", ""))
    if preset is not None:  # ?preset=quick: the form opens filled with it (no JS needed)
        initial.update(preset["values"])
    form = RunForm(request.POST or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        run = run_services.launch(
            request.user,
            form.cleaned_data["program"],
            form.cleaned_data["dataset"],
            form.run_config,
            version=form.version,
        )
        return redirect(run)
    return render(request, "training/run_form.html", {"form": form})


@require_GET
def run_detail(request, pk: int):
    run = owned_run(request, pk)
    context = live.page_context(run)
    context["config_json"] = json.dumps(run.config, indent=2)
    context.update(trace_summary(run))
    context.update(table_context(run, request.GET))
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
    run = run_services.request_cancel(owned_run(request, pk))
    if request.htmx:
        return HttpResponse(live.render_parts(run, ("status", "actions"), oob=True))
    return redirect(run)


@require_POST
def run_resume(request, pk: int):
    run = owned_run(request, pk)
    try:
        run = run_services.resume(run)
    except run_services.ResumeError as exc:
        messages.error(request, str(exc))
    return page_redirect(request, run)


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
