"""LM call traces of a run: the filtered list, one call in full, and every candidate.

Everything shown here was sent to or came from a language model: the templates print it
with Django's autoescaping (never ``|safe``), inside ``<pre>`` so it reads as text.
"""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET

from training.engine.language_models.tracing import ROLES
from training.insight import trace_reads as selectors
from training.runs.views.runs import owned_run


@require_GET
def trace_list(request, pk: int):
    run = owned_run(request, pk)
    filters = selectors.TraceFilters.from_query(request.GET)
    page = selectors.trace_page(run, filters, request.GET.get("page"))
    return render(
        request,
        "training/trace_list.html",
        {
            "run": run,
            "page": page,
            "filters": filters,
            "roles": ROLES,
            "splits": selectors.SPLITS,
            "page_query": filters.as_query(),
            **selectors.trace_summary(run),
        },
    )


@require_GET
def trace_detail(request, pk: int, trace_pk: int):
    run = owned_run(request, pk)
    trace = selectors.trace_detail(run, trace_pk)
    if trace is None:
        raise Http404("No such call in this run.")
    previous, following = selectors.neighbours(trace)
    return render(
        request,
        "training/trace_detail.html",
        {"run": run, "trace": trace, "previous": previous, "following": following},
    )


@require_GET
def candidate_list(request, pk: int):
    run = owned_run(request, pk)
    page = selectors.candidate_page(run, request.GET.get("page"))
    return render(request, "training/candidate_list.html", {"run": run, "page": page})
