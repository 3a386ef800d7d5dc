"""Runs: list (filter + sort), launch, the live run page, cancel, resume, candidates."""

from __future__ import annotations

import difflib
import json

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from datasets.models import Dataset
from training.forms import RunForm
from training.models import Candidate, Program, Run
from training.services import live, reaper
from training.services import runs as run_services


def owned_run(request, pk: int) -> Run:
    return get_object_or_404(
        Run.objects.select_related("program", "dataset"), pk=pk, owner=request.user
    )


@require_GET
def run_list(request):
    reaper.reap_if_due()
    runs, applied = run_services.runs_for(request.user, request.GET)
    return render(
        request,
        "training/run_list.html",
        {
            "runs": runs,
            "applied": applied,
            "statuses": Run.STATUS_CHOICES,
            "sorts": run_services.SORTS,
            "programs": Program.objects.filter(owner=request.user).only("id", "name"),
            "datasets": Dataset.objects.filter(owner=request.user).only("id", "name"),
        },
    )


@require_http_methods(["GET", "POST"])
def run_create(request):
    initial = {}
    program_id = request.GET.get("program", "")
    if program_id.isdigit():
        program = Program.objects.filter(pk=int(program_id), owner=request.user).first()
        if program is not None:
            initial = {"program": program.pk, "dataset": program.dataset_id}
    form = RunForm(request.POST or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        run = run_services.launch(
            request.user,
            form.cleaned_data["program"],
            form.cleaned_data["dataset"],
            form.run_config,
        )
        return redirect(run)
    return render(request, "training/run_form.html", {"form": form})


@require_GET
def run_detail(request, pk: int):
    reaper.reap_if_due()
    run = owned_run(request, pk)
    context = live.page_context(run)
    context["config_json"] = json.dumps(run.config, indent=2)
    return render(request, "training/run_detail.html", context)


@require_GET
@never_cache
def run_poll(request, pk: int):
    """Polled every few seconds while a run is active: reaps dead workers, refreshes status.

    The live stream is the WebSocket; this is the safety net that notices a worker that
    died without a word (nothing would ever be streamed for it).
    """
    run = owned_run(request, pk)
    if run.status == Run.RUNNING:
        reaper.reap_stale()
        run.refresh_from_db()
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
    if request.htmx:  # a full reload: the page re-renders from the DB and reconnects
        response = HttpResponse(status=204)
        response["HX-Redirect"] = run.get_absolute_url()
        return response
    return redirect(run)


@require_GET
def candidate_detail(request, pk: int, candidate_pk: int):
    run = owned_run(request, pk)
    candidate = get_object_or_404(Candidate, pk=candidate_pk, run=run)
    parents = candidate.parents()
    diffs = [  # one per parent: a crossover shows what it took from each
        {
            "parent": parent,
            "lines": [
                (_diff_class(line), line)
                for line in difflib.unified_diff(
                    _as_text(parent.value).splitlines(),
                    _as_text(candidate.value).splitlines(),
                    fromfile=f"{parent.candidate_id} (parent)",
                    tofile=candidate.candidate_id,
                    lineterm="",
                )
            ],
        }
        for parent in parents
    ]
    value = candidate.value or {}
    return render(
        request,
        "training/candidate_detail.html",
        {
            "run": run,
            "candidate": candidate,
            "parent": parents[0] if parents else None,
            "parents": parents,
            "diffs": diffs,
            "instructions": value.get("instructions", ""),
            "examples": [
                {
                    "inputs": json.dumps(ex.get("inputs"), indent=2, ensure_ascii=False),
                    "outputs": json.dumps(ex.get("outputs"), indent=2, ensure_ascii=False),
                }
                for ex in value.get("examples", [])
                if isinstance(ex, dict)
            ],
            "other": {k: v for k, v in value.items() if k not in ("instructions", "examples")},
        },
    )


def _as_text(value) -> str:
    """A candidate's value as diffable text: instructions as prose, examples as JSON."""
    value = value or {}
    lines = ["instructions:", *(value.get("instructions") or "").splitlines(), "", "examples:"]
    for example in value.get("examples", []) or []:
        lines.append(json.dumps(example, ensure_ascii=False, sort_keys=True))
    for key, item in value.items():
        if key not in ("instructions", "examples"):
            lines += ["", f"{key}:", json.dumps(item, ensure_ascii=False, sort_keys=True, indent=1)]
    return "\n".join(lines)


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "diff-file"
    if line.startswith("@@"):
        return "diff-hunk"
    if line.startswith("+"):
        return "diff-add"
    if line.startswith("-"):
        return "diff-del"
    return "diff-same"
