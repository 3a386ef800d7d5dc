"""Runs: list (filter + sort), launch, resume (the run page itself is
``training.insight.views.run_page``).

GET views only read: a run whose worker died is failed by the reaper
(``manage.py reap_runs``, see ``training.execution.liveness.reaper``), never by a page view.
"""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.redirects import page_redirect
from datasets import selectors as dataset_selectors
from training import optimizer_registry
from training.execution import forecast_shown
from training.models import Run
from training.programs import selectors as program_selectors
from training.runs import launch as run_services
from training.runs import prefill, run_tree, selectors
from training.runs.forms import RunForm


def owned_run(request, pk: int) -> Run:
    return selectors.owned_run(request.user, pk)


@require_GET
def run_list(request):
    runs, applied = selectors.runs_for(request.user, request.GET)
    runs = run_tree.as_tree(runs)  # branches under the run they came from
    runs = selectors.with_test_intervals(runs)  # each before → after with its interval
    return render(
        request,
        "training/run_list.html",
        {
            "runs": runs,
            "applied": applied,
            "statuses": Run.STATUS_CHOICES,
            "optimizers": optimizer_registry.names(),
            "sorts": selectors.SORTS,
            "tags": selectors.tags_of(request.user),
            "programs": program_selectors.program_choices(request.user),
            "datasets": dataset_selectors.dataset_choices(request.user),
        },
    )


@require_http_methods(["GET", "POST"])
def run_create(request):
    initial = prefill.initial_from_query(request.user, request.GET)
    form = RunForm(request.POST or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        program, dataset = form.cleaned_data["program"], form.cleaned_data["dataset"]
        run = run_services.launch(
            request.user,
            program,
            dataset,
            form.run_config,
            version=form.version,
            shown_forecast=forecast_shown.carried(
                request.POST.get("forecast_shown"), program, form.version, dataset, form.run_config
            ),
        )
        return redirect(run)
    return render(request, "training/run_form.html", {"form": form})


@require_POST
def run_resume(request, pk: int):
    run = owned_run(request, pk)
    try:
        run = run_services.resume(run)
    except run_services.ResumeError as exc:
        messages.error(request, str(exc))
    return page_redirect(request, run)
