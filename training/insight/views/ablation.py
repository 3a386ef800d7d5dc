"""The run page's "ablate" action on a part of the final prompt (``training.insight.ablation``):
a GET answers the part's cell (its stored result, or the forecast with a confirm button), a
POST queues the worker and answers the cell that polls (htmx ``every``) until the result is
there. The part is named by its variable and its place in the provenance list."""

from __future__ import annotations

from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from training.insight import ablation
from training.runs.views.runs import owned_run


def _place(request) -> tuple[str, int]:
    source = request.POST if request.method == "POST" else request.GET
    try:
        return str(source.get("variable", ""))[:200], int(source.get("piece", ""))
    except ValueError:
        raise Http404("no such part") from None


@require_http_methods(["GET", "POST"])
def run_ablation(request, pk: int):
    run = owned_run(request, pk)
    if not request.htmx:
        return HttpResponseRedirect(f"{run.get_absolute_url()}#provenance")
    variable, index = _place(request)
    context = {"run": run, "variable": variable, "index": index, "poll": ablation.POLL_SECONDS}
    try:
        if request.method == "POST":
            row = ablation.start(run, variable, index)
            context.update(result=row, live=ablation.is_live(row))
        else:
            offer = ablation.forecast(run, variable, index)
            stored = offer["stored"]
            if stored is not None:
                context.update(result=stored, live=ablation.is_live(stored))
            elif request.GET.get("ask"):
                context["offer"] = offer
    except ablation.AblationError as exc:
        context["problem"] = str(exc)
    return render(request, "training/partials/ablation_cell.html", context)
