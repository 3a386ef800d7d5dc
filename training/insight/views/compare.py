"""Compare runs: overlaid histories, a metrics table, before/after side by side, config diff."""

from __future__ import annotations

import json

from django.shortcuts import render
from django.views.decorators.http import require_GET

from training.insight import comparison, learned_comparison
from training.runs import run_tree, selectors


@require_GET
def compare(request):
    ids = [int(value) for value in request.GET.getlist("runs") if value.isdigit()]
    runs = selectors.with_test_intervals(run_tree.as_tree(selectors.runs_by_ids(request.user, ids)))
    context = {"selected_ids": ids, "runs": runs}
    if len(runs) >= 2:
        data = comparison.compare(runs)
        context.update(data)
        context["compare_json"] = json.dumps(data["chart"])
        context["learned"] = learned_comparison.compare_learned(runs)
    else:
        context["choices"] = selectors.with_test_intervals(selectors.compare_choices(request.user))
        if ids:
            context["too_few"] = True
    return render(request, "training/compare.html", context)
