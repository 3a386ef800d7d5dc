"""The page `make run` opens on: the user's programs one click from a launch, recent runs."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from training.models import Program, Run

RECENT = 5


@require_GET
def dashboard(request):
    programs = Program.objects.filter(owner=request.user).select_related("dataset")
    runs = (
        Run.objects.filter(owner=request.user)
        .select_related("program", "dataset")
        .order_by("-created")
    )
    context = {
        "programs": programs.order_by("-created")[:RECENT],
        "runs": runs[:RECENT],
        "run_count": runs.count(),
    }
    return render(request, "training/home.html", context)
