"""Corrections on the run page: the "Correct the data" panel (the run's sample answers, each
with the reusable per-row correction partial of ``datasets.views.versions``; loaded by htmx
after the page, re-polled while the run is active, since samples arrive when it succeeds),
every row of the per-example table (``eval_correction``, ``eval_pending``). Re-scoring a finished
run is ``views/rescore.py``."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from datasets import selectors as dataset_selectors
from datasets import versions
from datasets.views.versions import correction_context
from training.insight import eval_table
from training.insight.example_rows import eval_corrections
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


@require_http_methods(["GET", "POST"])
def eval_correction(request, pk: int, index: int):
    """One per-example table row's corrections (``eval_corrections``; ``split``: test, the
    default, or validation): POST ``action`` (a
    mark, ``answer`` with ``answer_<field>``, an undo) saves it at once and answers with the
    row's cell, plus ``HX-Trigger: corrections-changed`` so the count above the table (and
    the sample answers' panel) ask for themselves again."""
    run = selectors.owned_run(request.user, pk)
    data = request.POST if request.method == "POST" else request.GET
    split = data.get("split") or eval_table.TEST
    if split not in eval_table.SPLITS:
        raise Http404("No such split.")
    rows, _ = eval_table.example_rows(run, split)
    error = ""
    status = 200
    if request.method == "POST":
        answer = {name: request.POST.get(f"answer_{name}", "") for name in run.dataset.target_names}
        try:
            eval_corrections.apply(run, rows, index, request.POST.get("action", ""), answer, split)
        except versions.CorrectionError as exc:
            error = str(exc)
            status = 200 if request.htmx else 400  # htmx swaps only 2xx: the cell says it
    context = eval_corrections.row_context(run, rows, index, split)
    if context is None:
        raise Http404("No such example.")
    if not request.htmx and request.method == "POST" and not error:
        return redirect(f"{run.get_absolute_url()}#eval-table")
    response = render(
        request,
        "training/partials/eval_correction.html",
        {**context, "error": error},
        status=status,
    )
    if request.method == "POST" and not error:
        response["HX-Trigger"] = "corrections-changed"
    return response


@require_GET
@never_cache
def eval_pending(request, pk: int):
    """The count of unpublished corrections above the per-example table."""
    run = selectors.owned_run(request.user, pk)
    context = {"run": run, **eval_corrections.pending_summary(run)}
    return render(request, "training/partials/eval_pending.html", context)
