"""Launching, cancelling, pausing and resuming runs (also with new budget caps); the runs
list's filters live in ``training.runs.selectors``."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from training.execution import events, forecast, run_config, run_state
from training.execution.budget import BudgetError, caps_from, describe, used_of
from training.execution.sending import enqueue
from training.models import Candidate, EpochLog, OptimizerError, Program, ProgramVersion, Run
from training.programs import program_versions


def launch(
    owner,
    program: Program,
    dataset,
    config: dict[str, Any],
    version: ProgramVersion | None = None,
    shown_forecast: dict[str, Any] | None = None,
    **parents: Any,
) -> Run:
    """Create and enqueue a run of ``version`` of ``program`` (None: version 1, as created),
    with the forecast the launch form showed for these values (``shown_forecast``,
    ``execution.forecast_shown``), else one made now; the run page shows it against the
    actual. ``parents``: a branch's ``parent_run`` and ``parent_candidate``."""
    if version is None:
        version = program_versions.first_version(program)
    elif version.program_id != program.pk:
        raise ValueError(f"version {version.number} belongs to another program")
    predicted = shown_forecast or forecast.at_launch(program, dataset, config)
    key, value = run_config.TRAINING_ORDER
    config = {**config, key: value}
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner,
            program=program,
            program_version=version,
            dataset=dataset,
            config=config,
            forecast=predicted,
            **parents,
        )
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
    Run.objects.filter(pk=run.pk, status__in=(Run.QUEUED, Run.PAUSED)).update(
        status=Run.CANCELLED, finished_at=timezone.now()
    )
    run.refresh_from_db()
    events.run_changed(run, events.STATUS)
    return run


class ResumeError(ValueError):
    pass


class PauseError(ValueError):
    pass


def request_pause(run: Run) -> Run:
    """Pause a run without losing anything: a running one stops after its current batch of
    calls (OMEGA's step under way finishes first; the checkpoint is saved there, with the
    engine's pause point), then frees its worker, status "paused"; a queued one is paused at
    once. Resume continues from exactly that batch with the same population, optimizer state
    and random draws.

    Decided by the database, like Cancel: a run claimed meanwhile still sees the flag."""
    if not run.can_pause:
        raise PauseError("Only a queued or running run with training still to do can pause.")
    Run.objects.filter(pk=run.pk, status__in=Run.ACTIVE).update(pause_requested=True)
    Run.objects.filter(pk=run.pk, status=Run.QUEUED).update(
        status=Run.PAUSED, finished_at=timezone.now()
    )
    run.refresh_from_db()
    events.run_changed(run, events.STATUS)
    return run


def resume(run: Run) -> Run:
    """Relaunch a failed, cancelled, stopped or paused run from its checkpoint (its last
    completed epoch, or the batch a pause stopped at; new attempt)."""
    if not run.can_resume:
        raise ResumeError(
            "Only a failed or cancelled run with at least one completed epoch can be resumed."
        )
    with transaction.atomic():
        changed = Run.objects.filter(pk=run.pk, status__in=Run.RESUMABLE).update(
            **run_state.resumed()
        )
        run.refresh_from_db()
        if changed:
            enqueue(run)
    events.run_changed(run, events.STATUS)
    return run


def resume_with_caps(run: Run, data: dict[str, Any]) -> Run:
    """New caps (form data), then resume the run. A cap at or below what the run already
    used is refused (it would stop again at once): :class:`BudgetError`."""
    errors: dict[str, str] = {}
    caps = caps_from(data, errors)
    used = used_of(run)
    for key, cap in caps.items():
        if key in errors or cap is None or used[key] is None:
            continue
        if cap <= used[key]:
            errors[key] = (
                f"must be above what the run has used ({describe(key, used[key])}), got {cap:g}"
            )
    if errors:
        raise BudgetError(errors)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        config = dict(locked.config)
        config.update(caps)
        Run.objects.filter(pk=run.pk).update(config=config)
        if locked.checkpoint_json is None:
            # Stopped before its first epoch ended: it starts over from the program, so the
            # rows of that partial epoch would be ghosts of the same candidate ids.
            for model in (Candidate, OptimizerError, EpochLog):
                model.objects.filter(run_id=run.pk).delete()
    run.refresh_from_db()
    return resume(run)
