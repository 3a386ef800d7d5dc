"""The worker's side of candidates by hand (``training.runs.hand_candidates`` queues them in
``Run.hand_candidates``): at a batch end the persistence callback takes the queued ones off
the run row it has just re-read, hands each to the optimizer (``Optimizer.add_by_hand``:
pending, scored at its next scoring step like any other) and records each entry's state,
``added`` or ``refused`` with why. A paused run's queue waits for its resumed attempt."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from training.models import Run

QUEUED, ADDED, REFUSED = "queued", "added", "refused"


def queued(run: Run) -> list[dict[str, Any]]:
    """The entries of ``run`` (a row just read) still waiting for the optimizer."""
    return [entry for entry in run.hand_candidates or [] if entry.get("state") == QUEUED]


def add_to(optimizer: Any, entries: list[dict[str, Any]]) -> dict[int, tuple[str, str]]:
    """Give each entry to the optimizer; {entry number: (state, note)}."""
    results: dict[int, tuple[str, str]] = {}
    for entry in entries:
        try:
            candidate = optimizer.add_by_hand(
                entry["variable"], entry["value"], parent_ids=[entry["parent"]]
            )
            results[entry["n"]] = (ADDED, str(candidate.get("id", "")))
        except (AttributeError, KeyError, ValueError) as exc:
            results[entry["n"]] = (REFUSED, str(exc)[:200])
    return results


def record(run_id: int, attempt: int, results: dict[int, tuple[str, str]]) -> None:
    """Write each entry's state (on this attempt's run row only)."""
    if not results:
        return
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id, attempt=attempt).first()
        if run is None:
            return
        entries = []
        for entry in run.hand_candidates or []:
            if entry.get("n") in results:
                state, note = results[entry["n"]]
                entry = {**entry, "state": state, "note": note}
            entries.append(entry)
        Run.objects.filter(pk=run_id).update(hand_candidates=entries)
