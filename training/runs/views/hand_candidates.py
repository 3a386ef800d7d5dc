"""Add your own candidate to a live population (``training.runs.hand_candidates``): start from
one of the run's candidates, edit its instructions and its few-shot examples (keep, remove or
rewrite each as JSON, add one), see the diff (``preview``), then add it. Only the run's owner:
others get 404."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from training.engine.optimizers.optimizer import MAX_BY_HAND_CHARS
from training.programs import candidate_diff
from training.runs import hand_candidates, selectors


@require_http_methods(["GET", "POST"])
def hand_candidate(request, pk: int, candidate_pk: int):
    run = selectors.owned_run(request.user, pk)
    candidate = selectors.run_candidate(run, candidate_pk)
    value = candidate.value or {}
    posted = request.POST if request.method == "POST" else {}
    texts, new_example = hand_candidates.example_texts(candidate, posted)
    context = {
        "run": run,
        "candidate": candidate,
        "accepts": hand_candidates.accepts(run),
        "instructions": posted.get("branch_instructions", value.get("instructions", "")),
        "has_examples": "examples" in value,
        "examples": list(enumerate(texts)),
        "removed": {i for i in range(len(texts)) if posted.get(f"remove_{i}")},
        "new_example": new_example,
        "max_chars": MAX_BY_HAND_CHARS,
    }
    if request.method == "POST":
        try:
            edits = hand_candidates.read_edits(run, candidate, request.POST)
            if request.POST.get("preview"):
                new = hand_candidates.preview(candidate, edits)
                context["diff"] = candidate_diff.diff_values(
                    value, new, candidate.candidate_id, "by hand"
                )
            else:
                entry = hand_candidates.submit(run, candidate, edits)
                messages.success(
                    request,
                    f"Candidate by hand #{entry.number} queued: the optimizer takes it at the "
                    "run's next batch and scores it like any other.",
                )
                return redirect(run)
        except hand_candidates.HandCandidateError as exc:
            context["error"] = str(exc)
    return render(request, "training/hand_candidate.html", context)
