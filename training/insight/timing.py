"""How long a run has taken, and how long its training has left (the run page's timing line).

Rendered inside the progress fragment, which every live update carries (train begin, each
batch, each epoch, the last update when the run finishes), so the final duration reaches an
open page without a reload. Between updates ``static/training/run_timing.js`` ticks the
elapsed time on from ``elapsed_seconds`` (measured here, on the server's clock).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from training.models import Run


def batches_done(run: Run) -> int:
    """Batches completed over all epochs (``current_epoch`` counts completed epochs)."""
    total = run.epochs * run.batches_per_epoch
    return min(total, run.current_epoch * run.batches_per_epoch + run.current_batch)


def eta_seconds(run: Run, now: datetime) -> float | None:
    """Seconds of training left, from this attempt's pace over the batches done so far.

    None when the run is not training, or no batch of this attempt is done yet. Covers the
    training batches only (the evaluations after training come on top)."""
    if run.status != Run.RUNNING or run.training_started_at is None or not run.batches_per_epoch:
        return None
    total = run.epochs * run.batches_per_epoch
    done = batches_done(run)
    since = done - run.training_start_batch
    if since <= 0 or done >= total:
        return None
    seconds_per_batch = (now - run.training_started_at).total_seconds() / since
    return max(0.0, seconds_per_batch * (total - done))


def timing(run: Run, now: datetime | None = None) -> dict[str, Any]:
    """``elapsed_seconds`` (so far, or in all: the attempts' running time, ``Run.duration``),
    ``eta_seconds``, ``finished`` and ``ticking``."""
    now = now or timezone.now()
    duration = run.duration_at(now)
    elapsed = None if duration is None else max(0.0, duration.total_seconds())
    return {
        "elapsed_seconds": elapsed,
        "eta_seconds": eta_seconds(run, now),
        "batches_since_start": max(0, batches_done(run) - run.training_start_batch),
        "finished": run.finished_at is not None and run.status in Run.FINISHED,
        "ticking": run.status == Run.RUNNING and run.started_at is not None,
    }
