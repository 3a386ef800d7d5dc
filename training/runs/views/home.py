"""The page `make run` opens on: the user's programs one click from a launch, recent runs."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from training.programs import selectors as program_selectors
from training.runs import selectors

RECENT = 5


@require_GET
def dashboard(request):
    runs = selectors.runs_of(request.user)
    context = {
        "programs": program_selectors.recent_programs(request.user, RECENT),
        "runs": runs[:RECENT],
        "run_count": runs.count(),
    }
    return render(request, "training/home.html", context)
