"""Your own candidate in a live population (issue 30): on a running or paused OMEGA or
RandomFewShot run, a person starts from any of its candidates, edits the instructions (and
keeps or removes examples, as when branching: ``branching.edited_value``), sees the diff, and
adds it. The candidate waits in ``Run.hand_candidates`` until the worker's next batch end
(``execution.persistence``), which hands it to the optimizer (``Optimizer.add_by_hand``): it
is scored at the optimizer's next scoring step and from then on treated as any other, shown
with operation ``by_hand`` ("by hand") in the leaderboard and the lineage.

Example:

    entry = hand_candidates.submit(run, candidate, Edits(instructions="Route by keyword."))
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from training.execution import events
from training.execution.hand_candidates import QUEUED
from training.models import Candidate, Run
from training.runs.branching import BranchError, Edits, edited_value

#: Optimizers whose population takes a candidate by hand.
OPTIMIZERS = ("OMEGA", "RandomFewShot")
#: Candidates by hand one run may hold (queued and added together).
MAX_PER_RUN = 20


class HandCandidateError(ValueError):
    """A candidate that cannot be added; the message says why, for the person who asked."""


def accepts(run: Run) -> bool:
    """Whether ``run``'s population can take a candidate by hand now."""
    return run.optimizer_name in OPTIMIZERS and run.status in (*Run.ACTIVE, Run.PAUSED)


def preview(candidate: Candidate, edits: Edits) -> dict[str, Any]:
    """The edited value, or HandCandidateError (the branch rules, said in the same words)."""
    try:
        value, _ = edited_value(candidate, edits)
    except BranchError as exc:
        raise HandCandidateError(str(exc)) from None
    if value == (candidate.value or {}):
        raise HandCandidateError("That is the candidate as it is: change something first.")
    return value


def submit(run: Run, candidate: Candidate, edits: Edits) -> dict[str, Any]:
    """Queue the edited candidate for the run's live population; the entry queued."""
    if not accepts(run):
        raise HandCandidateError(
            "Only a queued, running or paused OMEGA or RandomFewShot run takes a candidate by hand."
        )
    value = preview(candidate, edits)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        entries = list(locked.hand_candidates or [])
        if len(entries) >= MAX_PER_RUN:
            raise HandCandidateError(f"A run takes at most {MAX_PER_RUN} candidates by hand.")
        entry = {
            "n": len(entries) + 1,
            "variable": candidate.variable,
            "parent": candidate.candidate_id,
            "value": value,
            "state": QUEUED,
            "note": "",
        }
        Run.objects.filter(pk=run.pk).update(hand_candidates=[*entries, entry])
    run.refresh_from_db()
    events.run_changed(run, ("leaderboard",))
    return entry
