"""The state of one attempt of a run: claim it, label its phase, finish or fail it.

Every transition is one filtered ``UPDATE`` on the run row (this attempt, in the state the
transition starts from), so two workers, the reaper and the user's Cancel/Resume can race
without one overwriting another's decision: whoever's filter still matches wins, the others
change nothing. A transition that ends an attempt announces it on the run's live group.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from training.execution import events
from training.models import Candidate, EpochLog, OptimizerError, Run


def resumed(**more: Any) -> dict[str, Any]:
    """The update that queues a run's next attempt from its checkpoint (Resume, pressed or
    automatic): a new attempt number, nothing left of the last one's end."""
    return {
        "status": Run.QUEUED,
        "attempt": F("attempt") + 1,
        "error": "",
        "cancel_requested": False,
        "pause_requested": False,
        "resume_at_start": False,
        "finished_at": None,
        "phase": "",
        **more,
    }


def claim(run_id: int, attempt: int, worker: str) -> bool:
    """Queued → running for this attempt; False if it is not queued any more.

    Starts the run's working clock again where the earlier attempts left it
    (``Run.clock_started_at``: now less their working seconds)."""
    now = timezone.now()
    queued = Run.objects.filter(pk=run_id, attempt=attempt, status=Run.QUEUED)
    worked = queued.values_list("active_seconds", flat=True).first()
    if worked is None:
        return False
    return bool(
        queued.update(
            status=Run.RUNNING,
            started_at=Coalesce("started_at", now),
            clock_started_at=now - timedelta(seconds=max(0.0, float(worked))),
            heartbeat_at=now,
            finished_at=None,
            worker=worker,
            worker_pid=os.getpid(),
            error="",
            phase="starting",
        )
    )


def set_phase(run_id: int, attempt: int, phase: str) -> Run:
    """Label what the running attempt does now (e.g. "before eval 1/2"); the run re-read."""
    # The column is short (it labels a progress bar); PostgreSQL refuses longer values.
    phase = phase[: Run._meta.get_field("phase").max_length]
    Run.objects.filter(pk=run_id, attempt=attempt, status=Run.RUNNING).update(
        phase=phase, heartbeat_at=timezone.now()
    )
    return Run.objects.select_related("program").get(pk=run_id)


def swap_phase(
    run_id: int,
    attempt: int,
    phase: str,
    only_from: str | None = None,
    unless: str | None = None,
) -> tuple[str, Run] | None:
    """Set the running attempt's phase to ``phase`` unless it changed meanwhile: only when it
    is ``only_from`` (if given), never when it is ``unless`` (if given). Returns (the phase it
    replaced, the run re-read), or None when nothing was changed."""
    running = Run.objects.filter(pk=run_id, attempt=attempt, status=Run.RUNNING)
    current = running.values_list("phase", flat=True).first()
    if current is None or (only_from is not None and current != only_from) or current == unless:
        return None
    phase = phase[: Run._meta.get_field("phase").max_length]
    if not running.filter(phase=current).update(phase=phase, heartbeat_at=timezone.now()):
        return None
    return current, Run.objects.select_related("program").get(pk=run_id)


def cancel_requested(run_id: int) -> bool:
    return bool(Run.objects.filter(pk=run_id).values_list("cancel_requested", flat=True).first())


def finish(run_id: int, attempt: int, status: str, **fields: Any) -> None:
    """Final state of this attempt (never overwrites a run the reaper already failed)."""
    updated = Run.objects.filter(pk=run_id, attempt=attempt, status=Run.RUNNING).update(
        status=status,
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
        phase="",
        pause_requested=False,  # answered: paused now, or the run ended before it could
        **fields,
    )
    if updated:
        events.run_row_changed(run_id)


def fail_attempt(run_id: int, attempt: int, error: str) -> bool:
    """Fail an attempt that is still queued or running; True if this call changed it."""
    updated = Run.objects.filter(
        pk=run_id, attempt=attempt, status__in=[Run.QUEUED, Run.RUNNING]
    ).update(status=Run.FAILED, error=error, finished_at=timezone.now(), phase="")
    if updated:
        events.run_row_changed(run_id)
    return bool(updated)


def drop_unfinished_epochs(run: Run) -> None:
    """Before a resume: delete what an abandoned, partial epoch left behind (everything of
    the earlier attempts when there is no checkpoint: the run starts again from the start).

    The checkpoint is the state after epoch ``checkpoint_epoch`` (engine epochs, 0-based,
    as EpochLog and Candidate.epoch store them). Rows of later epochs come from an attempt
    that stopped mid-epoch; the resumed optimizer restarts its candidate ids from the
    checkpoint's ``candidate_count``, so those rows would be ghosts (or be half-overwritten).
    """
    if run.checkpoint_json is None:  # a new start: nothing of an earlier attempt's epochs stays
        if run.attempt > 1:
            with transaction.atomic():
                Run.lock_before_its_rows(run.pk)
                for model in (Candidate, OptimizerError, EpochLog):
                    model.objects.filter(run_id=run.pk).delete()
        return
    point = run.checkpoint_position if isinstance(run.checkpoint_position, dict) else None
    if point is not None and isinstance(point.get("epoch"), int):
        _drop_after_pause(run, point["epoch"])
    elif run.checkpoint_epoch is not None:
        with transaction.atomic():
            Run.lock_before_its_rows(run.pk)  # as a map's embedding of them does
            later = {"run_id": run.pk, "epoch__gt": run.checkpoint_epoch}
            Candidate.objects.filter(**later).delete()
            OptimizerError.objects.filter(**later).delete()
            EpochLog.objects.filter(**later).delete()
    _drop_errors_after(run)


def _optimizer_state(run: Run) -> dict[str, Any]:
    """The optimizer's saved state in the run's checkpoint ({} when it has none)."""
    compile_config = run.checkpoint_json.get("compile") or {}
    state = (compile_config.get("optimizer") or {}).get("state")
    return state if isinstance(state, dict) else {}


def _drop_errors_after(run: Run) -> None:
    """Keep the run's first ``errors_reported`` optimizer errors (the optimizer's count in
    the checkpoint) and delete the later ones: an attempt that went on from the checkpoint
    and stopped without saving a newer one stored them, and the resumed optimizer reports
    them again (a pause's epoch is trained again from its batch, so epochs alone cannot
    tell them apart). A checkpoint without an optimizer's state keeps every row."""
    reported = _optimizer_state(run).get("errors_reported")
    if not isinstance(reported, int) or isinstance(reported, bool) or reported < 0:
        return
    with transaction.atomic():
        later = OptimizerError.objects.filter(run_id=run.pk).order_by("pk")[reported:]
        OptimizerError.objects.filter(pk__in=list(later.values_list("pk", flat=True))).delete()


def _drop_after_pause(run: Run, epoch: int) -> None:
    """The checkpoint is where a pause stopped inside ``epoch``: the candidates it holds stay
    (those of ``epoch`` included); rows a later attempt made after it go (candidates numbered
    past the checkpoint's ``candidate_count``, later epochs, the unfinished epoch's log)."""
    known = int(_optimizer_state(run).get("candidate_count") or 0)
    with transaction.atomic():
        Run.lock_before_its_rows(run.pk)  # as a map's embedding of them does
        Candidate.objects.filter(run_id=run.pk, epoch__gt=epoch).delete()
        ghosts = [
            pk
            for pk, candidate_id in Candidate.objects.filter(
                run_id=run.pk, epoch=epoch
            ).values_list("pk", "candidate_id")
            if _number(candidate_id) > known
        ]
        Candidate.objects.filter(pk__in=ghosts).delete()
        OptimizerError.objects.filter(run_id=run.pk, epoch__gt=epoch).delete()
        EpochLog.objects.filter(run_id=run.pk, epoch__gte=epoch).delete()


def _number(candidate_id: str) -> int:
    """The count in an optimizer's candidate id (``c12`` → 12; 0 for another form)."""
    digits = candidate_id[1:] if candidate_id[:1] == "c" else ""
    return int(digits) if digits.isdigit() else 0
