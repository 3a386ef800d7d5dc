"""The run page's "Selection" section: every scored candidate's interval, paired verdicts,
selection-split score, prompt tokens and latency, and the two charts drawn from them
(``training.insight.candidate_confidence``); and where each sentence and example of the
final prompt came from (``training.insight.provenance``). An htmx fragment, loaded once the page is up
(the bootstraps take a moment on a large run) and again every few seconds while the run is
active."""

from __future__ import annotations

import json

from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_GET

from training.insight import ablation, candidate_confidence, provenance
from training.runs.views.runs import owned_run


@require_GET
def run_selection(request, pk: int):
    run = owned_run(request, pk)
    if not request.htmx:  # a plain link: the section lives on the run page
        return HttpResponseRedirect(f"{run.get_absolute_url()}#selection-section")
    report = candidate_confidence.report(run)
    context = {
        "run": run,
        **report,
        "points_json": json.dumps(report["points"]),
        "provenance": ablation.annotate(run, provenance.provenance(run)),
        "poll": ablation.POLL_SECONDS,
    }
    return render(request, "training/partials/run_candidate_confidence.html", context)
