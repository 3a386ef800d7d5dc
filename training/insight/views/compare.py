"""Compare runs: overlaid histories, a metrics table, before/after side by side, config diff."""

from __future__ import annotations

import json

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.ids import as_id
from training.insight.comparison import figures, learned
from training.runs import run_tree, selectors


@require_GET
def compare(request):
    asked = [value for value in request.GET.getlist("runs") if value.isdigit()]
    ids = [pk for pk in map(as_id, asked) if pk is not None]
    if len(ids) < len(asked):  # a number no run can have
        raise Http404("No such run")
    runs = selectors.with_test_intervals(run_tree.as_tree(selectors.runs_by_ids(request.user, ids)))
    context = {"selected_ids": ids, "runs": runs}
    if len(runs) >= 2:
        data = figures.compare(runs)
        context.update(data)
        for run, heading in zip(runs, data["headings"], strict=True):
            run.compare_heading = heading
        context["compare_json"] = json.dumps(data["chart"])
        context["learned"] = learned.compare_learned(runs)
    else:
        context["choices"] = selectors.with_test_intervals(selectors.compare_choices(request.user))
        if ids:
            context["too_few"] = True
    return render(request, "training/compare.html", context)
