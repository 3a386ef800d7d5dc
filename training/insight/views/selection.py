"""The run page's "Selection" section: every scored candidate's interval, paired verdicts,
selection-split score, prompt tokens and latency, and the two charts drawn from them
(``training.insight.candidate_confidence``); and where each sentence and example of the
final prompt came from (``training.insight.provenance``). An htmx fragment, loaded once the page is up
(the bootstraps take a moment on a large run); while the run goes, the live stream sends it
whole when a candidate is scored or chosen and when the run finishes (the part
``candidate_confidence`` of ``training.insight.sections``)."""

from __future__ import annotations

from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_GET

from training.insight.sections import contexts
from training.runs.views.runs import owned_run


@require_GET
def run_selection(request, pk: int):
    run = owned_run(request, pk)
    if not request.htmx:  # a plain link: the section lives on the run page
        return HttpResponseRedirect(f"{run.get_absolute_url()}#selection-section")
    context = {"run": run, **contexts.selection(run)}
    return render(request, "training/partials/run_candidate_confidence.html", context)
