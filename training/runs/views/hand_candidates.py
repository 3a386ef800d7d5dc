"""Add your own candidate to a live population (``training.runs.hand_candidates``): start from
one of the run's candidates, edit its instructions and keep or remove its examples, see the
diff (``preview``), then add it. Only the run's owner: others get 404."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from training.programs import candidate_diff
from training.runs import hand_candidates, selectors
from training.runs.branching import Edits


def _edits(request, candidate) -> Edits | None:
    if request.method != "POST":
        return None
    examples = (candidate.value or {}).get("examples") or []
    return Edits(
        instructions=request.POST.get("branch_instructions"),
        examples=[
            "remove" if request.POST.get(f"remove_{i}") else "keep" for i in range(len(examples))
        ],
    )


@require_http_methods(["GET", "POST"])
def hand_candidate(request, pk: int, candidate_pk: int):
    run = selectors.owned_run(request.user, pk)
    candidate = selectors.run_candidate(run, candidate_pk)
    edits = _edits(request, candidate)
    value = candidate.value or {}
    context = {
        "run": run,
        "candidate": candidate,
        "accepts": hand_candidates.accepts(run),
        "instructions": value.get("instructions", "") if edits is None else edits.instructions,
        "examples": list(enumerate(value.get("examples") or [])),
        "removed": set()
        if edits is None
        else {i for i, action in enumerate(edits.examples) if action == "remove"},
    }
    if edits is not None:
        try:
            if request.POST.get("preview"):
                new = hand_candidates.preview(candidate, edits)
                context["diff"] = candidate_diff.diff_values(
                    value, new, candidate.candidate_id, "by hand"
                )
            else:
                entry = hand_candidates.submit(run, candidate, edits)
                messages.success(
                    request,
                    f"Candidate by hand #{entry['n']} queued: the optimizer takes it at the "
                    "run's next batch and scores it like any other.",
                )
                return redirect(run)
        except hand_candidates.HandCandidateError as exc:
            context["error"] = str(exc)
    return render(request, "training/hand_candidate.html", context)
