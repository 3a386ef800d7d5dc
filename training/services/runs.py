"""Launching, cancelling and resuming runs; the runs list's filters and sorting."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import ExpressionWrapper, F, FloatField, Q
from django.utils import timezone

from training.models import Program, Run
from training.services import live
from training.services.run_config import OPTIMIZERS
from training.tasks import enqueue


def launch(owner, program: Program, dataset, config: dict[str, Any]) -> Run:
    with transaction.atomic():
        run = Run.objects.create(owner=owner, program=program, dataset=dataset, config=config)
        enqueue(run)
    return run


def request_cancel(run: Run) -> Run:
    """Queued: cancelled at once. Running: the worker interrupts the run within about a second
    (``execution.CANCEL_CHECK_SECONDS``, then ``program.interrupt()``), in every phase.

    Decided by the database, not by ``run.status`` as the view read it: a worker may claim
    the run (queued → running) in between. The flag is set for either state in one update,
    so a run claimed meanwhile still sees it; then a run that is still queued is cancelled.
    """
    Run.objects.filter(pk=run.pk, status__in=(Run.QUEUED, Run.RUNNING)).update(
        cancel_requested=True
    )
    Run.objects.filter(pk=run.pk, status=Run.QUEUED).update(
        status=Run.CANCELLED, finished_at=timezone.now()
    )
    run.refresh_from_db()
    live.broadcast(run, ("status", "actions", "progress"))
    return run


class ResumeError(ValueError):
    pass


def resume(run: Run) -> Run:
    """Relaunch a failed or cancelled run from its last completed epoch (new attempt)."""
    if not run.can_resume:
        raise ResumeError(
            "Only a failed or cancelled run with at least one completed epoch can be resumed."
        )
    with transaction.atomic():
        changed = Run.objects.filter(pk=run.pk, status__in=(Run.FAILED, Run.CANCELLED)).update(
            status=Run.QUEUED,
            attempt=F("attempt") + 1,
            error="",
            cancel_requested=False,
            finished_at=None,
            phase="",
        )
        run.refresh_from_db()
        if changed:
            enqueue(run)
    live.broadcast(run, ("status", "actions", "progress"))
    return run


SORTS = {
    "started": ("started_at", "Start"),
    "status": ("status", "Status"),
    "program": ("program__name", "Program"),
    "dataset": ("dataset__name", "Dataset"),
    "best": ("best_reward", "Best val./train"),
    "baseline": ("baseline_reward", "Test before → after"),
    "improvement": ("improvement_value", "Test Δ"),
    "calls": ("lm_calls", "LM calls"),
    "duration": ("duration_value", "Duration"),
}


def runs_for(user, params: dict[str, str]) -> tuple[list[Run], dict[str, str]]:
    """The user's runs filtered and sorted by query parameters; returns (runs, applied)."""
    runs = Run.objects.filter(owner=user).select_related("program", "dataset")
    applied: dict[str, str] = {}
    status = params.get("status", "")
    if status in dict(Run.STATUS_CHOICES):
        runs = runs.filter(status=status)
        applied["status"] = status
    optimizer = params.get("optimizer", "")
    if optimizer in OPTIMIZERS:
        runs = runs.filter(config__optimizer__name=optimizer)
        applied["optimizer"] = optimizer
    for key in ("program", "dataset"):
        value = params.get(key, "")
        if value.isdigit():
            runs = runs.filter(**{f"{key}_id": int(value)})
            applied[key] = value
    text = params.get("q", "").strip()
    if text:
        runs = runs.filter(
            Q(program__name__icontains=text)
            | Q(dataset__name__icontains=text)
            | Q(program__model__icontains=text)
        )
        applied["q"] = text
    runs = runs.annotate(
        improvement_value=ExpressionWrapper(
            F("final_reward") - F("baseline_reward"),  # test after − test before
            output_field=FloatField(),
        )
    )
    sort = params.get("sort", "-started")
    key = sort.lstrip("-")
    if key not in SORTS:
        sort, key = "-started", "started"
    field = SORTS[key][0]
    applied["sort"] = sort
    if key == "duration":  # computed (running runs count up to now): sorted in Python
        ordered = sorted(runs, key=lambda run: (run.duration is None, run.duration or 0))
        if sort.startswith("-"):
            ordered = [r for r in ordered if r.duration is not None][::-1] + [
                r for r in ordered if r.duration is None
            ]
        return ordered, applied
    expression = (
        F(field).desc(nulls_last=True) if sort.startswith("-") else F(field).asc(nulls_last=True)
    )
    return list(runs.order_by(expression, "-id")), applied
