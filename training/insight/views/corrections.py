"""The run page's "Correct the data" panel: the run's sample answers, each with the
reusable per-row correction partial (``datasets.views.versions``). Loaded by htmx after the
page (and re-polled while the run is active, since samples arrive when it succeeds)."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from datasets import selectors as dataset_selectors
from datasets import versions
from datasets.views.versions import correction_context
from training.runs import selectors


@require_GET
@never_cache
def run_corrections(request, pk: int):
    run = selectors.owned_run(request.user, pk)
    dataset = run.dataset
    samples = run.samples or []
    rows = dataset_selectors.test_row_indices(dataset, len(samples))
    items = [
        {
            "sample": sample,
            **correction_context(request.user, dataset, row, sample.get("predicted"), run.pk),
        }
        for sample, row in zip(samples, rows, strict=False)
    ]
    context = {
        "run": run,
        "dataset": dataset,
        "items": items,
        "pending_count": versions.pending(request.user, dataset).count(),
    }
    return render(request, "training/partials/run_corrections.html", context)
