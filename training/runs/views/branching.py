"""Branch a run: from one of its candidates, or from its best (``training.runs.branching``)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from training.runs import branching, selectors
from training.runs.forms import BranchForm


@require_http_methods(["GET", "POST"])
def branch_create(request, pk: int, candidate_pk: int | None = None):
    run = selectors.owned_run(request.user, pk)
    if candidate_pk is None:
        candidate = branching.best_candidate(run)
        if candidate is None:  # the button shows while a run starts: say so, don't 404
            messages.info(request, "This run has no scored candidate to branch from yet.")
            return redirect(run)
    else:
        candidate = selectors.run_candidate(run, candidate_pk)
    form = BranchForm(request.POST or None, user=request.user, run=run, candidate=candidate)
    if request.method == "POST" and form.is_valid():
        try:
            branch = branching.launch_branch(
                request.user,
                run,
                candidate,
                form.edits(),
                form.cleaned_data["dataset"],
                form.run_config,
            )
        except branching.BranchError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect(branch)
    context = {"form": form, "run": run, "candidate": candidate}
    return render(request, "training/branch_form.html", context)
