"""The worker's side of candidates by hand (``training.runs.hand_candidates`` queues them as
``HandCandidate`` rows): at a batch end the persistence callback reads the run's queued ones,
hands each to the optimizer (``Optimizer.add_by_hand``: pending, scored at its next scoring
step like any other) and records each one's state, ``added`` or ``refused`` with why. A
paused run's queue waits for its resumed attempt."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from training.models import HandCandidate, Run

QUEUED, ADDED, REFUSED = HandCandidate.QUEUED, HandCandidate.ADDED, HandCandidate.REFUSED


def queued(run: Run) -> list[HandCandidate]:
    """The candidates of ``run`` (a row just read) still waiting for the optimizer (none
    read when its optimizer takes none by hand)."""
    if not run.takes_candidates_by_hand:
        return []
    return list(HandCandidate.objects.filter(run_id=run.pk, state=QUEUED).order_by("number"))


def add_to(optimizer: Any, entries: list[HandCandidate]) -> dict[int, tuple[str, str]]:
    """Give each candidate to the optimizer; {its number: (state, note)}."""
    results: dict[int, tuple[str, str]] = {}
    for entry in entries:
        try:
            candidate = optimizer.add_by_hand(
                entry.variable, entry.value, parent_ids=[entry.parent]
            )
            results[entry.number] = (ADDED, str(candidate.get("id", "")))
        except (AttributeError, KeyError, ValueError) as exc:
            results[entry.number] = (REFUSED, str(exc)[:200])
    return results


def record(run_id: int, attempt: int, results: dict[int, tuple[str, str]]) -> None:
    """Write each candidate's state (while the run is on this attempt only)."""
    if not results:
        return
    with transaction.atomic():
        locked = Run.objects.select_for_update().filter(pk=run_id, attempt=attempt)
        if locked.values_list("pk", flat=True).first() is None:
            return
        for number, (state, note) in results.items():
            HandCandidate.objects.filter(run_id=run_id, number=number).update(
                state=state, note=note
            )
