"""Corrections and versions: the reusable per-row correction endpoint (mark a prediction
right or wrong, or type the right answer, for one dataset row) and publishing the draft as
a new version (``datasets.versions``). Only on the user's own datasets: others get 404.

The row endpoint answers with ``datasets/partials/correction.html`` for that row, so any
table (the run page's sample answers, a per-example evaluation table) can put the partial in
a cell and let htmx swap it: ``{% include "datasets/partials/correction.html" %}`` with
``dataset``, ``row_index``, ``predicted_json`` (the prediction, as JSON), ``run_id`` and
``change`` (``versions.pending_by_row``'s entry, or None).
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import render
from django.views.decorators.http import require_http_methods, require_POST

from core.ids import as_id
from core.redirects import page_redirect
from datasets import selectors, versions


def correction_context(user, dataset, row_index: int, predicted=None, run_id=None) -> dict:
    """The partial's context for one row (also used by tables that include it)."""
    change = versions.pending(user, dataset).filter(row_index=row_index).first()
    return {
        "dataset": dataset,
        "row_index": row_index,
        "predicted_json": "" if predicted is None else json.dumps(predicted, ensure_ascii=False),
        "run_id": run_id or "",
        "change": change,
        "pending_count": versions.pending(user, dataset).count(),
    }


@require_http_methods(["GET", "POST"])
def correct_row(request, pk: int, row_index: int):
    dataset = selectors.owned_dataset(request.user, pk)
    predicted = request.POST.get("predicted") or request.GET.get("predicted") or None
    run_id = request.POST.get("run") or request.GET.get("run") or None
    error = ""
    status = 200
    if request.method == "POST":
        kind = request.POST.get("kind", "")
        try:
            if kind == "discard":
                versions.discard(request.user, dataset, row_index)
            else:
                answer = {
                    name: request.POST.get(f"answer_{name}", "") for name in dataset.target_names
                }
                versions.record(
                    request.user,
                    dataset,
                    row_index,
                    kind,
                    answer=answer,
                    predicted=predicted,
                    run_id=as_id(run_id),
                )
        except versions.CorrectionError as exc:
            error = str(exc)
            status = 200 if request.htmx else 400  # htmx swaps only 2xx: the partial says it
    try:
        shown = json.loads(predicted) if predicted else None
    except ValueError:
        shown = None
    context = correction_context(request.user, dataset, row_index, shown, run_id)
    context["error"] = error
    context["oob_pending"] = request.method == "POST"
    response = render(request, "datasets/partials/correction.html", context, status=status)
    if request.method == "POST" and not error:
        # Other counts on the page ask again (not the panel this partial sits in: its own
        # count comes out of band, and a panel redrawn meanwhile would lose this swap).
        response["HX-Trigger"] = "row-correction-saved"
    return response


@require_POST
def publish_version(request, pk: int):
    dataset = selectors.owned_dataset(request.user, pk)
    try:
        version = versions.publish(request.user, dataset)
    except versions.CorrectionError as exc:
        messages.error(request, str(exc))
        target = dataset
    else:
        messages.success(
            request,
            f"Published {version.label}, the next version of “{version.name}”, with "
            f"{version.changes.count()} change(s).",
        )
        target = version
    return page_redirect(request, "datasets:detail", pk=target.pk)


def versions_context(user, dataset) -> dict:
    """The dataset page's versions section: the line's versions with their change logs, and
    the user's unpublished corrections on this version."""
    draft = list(versions.pending(user, dataset))
    return {
        "versions": versions.versions_of(dataset),
        "draft_changes": draft,
        "pending_count": len(draft),
    }
