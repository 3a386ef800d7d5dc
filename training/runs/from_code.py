"""Runs streamed from the owner's own code: a ``fit`` running anywhere, shown as a run.

The engine's ``callbacks.RemoteMonitor`` creates the run (:func:`start`: the program as its
JSON, the rows the fit was given, its parameters) and then posts what happens in batches
(:func:`apply`): the engine's own events, stored by the same
:class:`~training.execution.recording.persistence.PersistenceCallback` a worker uses, so the
run page, its live fragments, the runs list and compare read such a run like any other; the
LM call traces and usage; each evaluation it was given, per example; and at ``train_end``
the trained program and the verdict. Every input is the owner's code's, so it is bounded
and checked like an import.

Such a run has no worker: it is never queued, resumed or re-sent; Cancel on its page is
answered to the code in the reply to its next batch; the reaper fails it when the code goes
quiet (``TRAINBOARD_CODE_RUN_QUIET_SECONDS``, ``execution.liveness.reaper``).
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from typing import Any

from asgiref.sync import async_to_sync
from django.db import DatabaseError, transaction
from django.db.models import F, Max
from django.utils import timezone

from datasets import from_code as code_datasets
from datasets.services import DatasetError
from training.engine.language_models import tracing
from training.execution import events, run_config, run_state, summaries
from training.execution.recording import persistence, traces
from training.models import EpochLog, Evaluation, LMCallTrace, Run
from training.programs import program_versions
from training.programs import programs as program_services
from training.programs.program_settings import fields_of

#: Events and traces one request may carry.
MAX_EVENTS = 500
MAX_TRACES = 500
#: Parent ids one candidate may name (OMEGA's crossovers name two).
MAX_PARENTS = 50
#: The event kinds a fit streams (the engine's, plus the monitor's ``evaluation``).
EVENT_KINDS = frozenset(
    {
        "train_begin",
        "epoch_begin",
        "batch_end",
        "epoch_end",
        "train_end",
        "candidate",
        "optimizer_error",
        "candidate_refused",
        "selection",
        "final_selection",
        "evaluation",
    }
)


class CodeRunError(Exception):
    """What the code sent cannot be stored: the message says what, ``field`` where."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def start(owner, body: dict[str, Any]) -> Run:
    """Create the run of a fit in the owner's code, with its program and its rows."""
    raw = json.dumps(body.get("program"))
    try:
        document, summary = program_services.parse_import(raw.encode("utf-8"))
    except program_services.ProgramError as exc:
        raise CodeRunError(f"the program cannot be read: {exc}", "program") from None
    engine_program = program_services.program_from_json(document)
    name = str(body.get("name") or document.get("name") or "")[:200].strip()
    rows = body.get("rows")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise CodeRunError("rows is a list of {inputs, targets} objects", "rows")
    params = body.get("params") if isinstance(body.get("params"), dict) else {}
    try:
        config = _config(summary, params, body, len(rows), _count(body.get("rows_total")))
    except (AttributeError, TypeError, ValueError) as exc:
        raise CodeRunError(
            f"the fit's settings are not what the engine sends: {exc}", "params"
        ) from None
    with transaction.atomic():
        try:
            dataset = code_datasets.create_from_rows(
                owner, f"{name or 'fit'}: rows", rows, fields_of(engine_program)
            )
        except (DatasetError, DatabaseError) as exc:
            raise CodeRunError(str(exc), "rows") from None
        program = program_services.import_program(
            owner, document, summary, name=name, dataset=dataset
        )
        now = timezone.now()
        run = Run.objects.create(
            owner=owner,
            program=program,
            program_version=program_versions.first_version(program),
            dataset=dataset,
            name=name,
            source=Run.CODE,
            config=config,
            status=Run.RUNNING,
            phase="training",
            started_at=now,
            clock_started_at=now,
            heartbeat_at=now,
        )
    events.run_row_changed(run.pk)
    return run


def apply(run: Run, body: dict[str, Any]) -> dict[str, Any]:
    """Store one batch the code posted (events in order, traces, usage), all of it or none
    (a batch refused is not half-stored, so a retry never stores its start twice); the
    reply tells the code whether its owner pressed Cancel."""
    if run.source != Run.CODE:
        raise CodeRunError("only a run from code takes events", "run")
    batch = body.get("events") or []
    calls = body.get("traces") or []
    if not isinstance(batch, list) or len(batch) > MAX_EVENTS:
        raise CodeRunError(f"events is a list of at most {MAX_EVENTS} objects", "events")
    if not isinstance(calls, list) or len(calls) > MAX_TRACES:
        raise CodeRunError(f"traces is a list of at most {MAX_TRACES} objects", "traces")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    recorder = persistence.PersistenceCallback(
        run.pk, run.attempt, run.group_name, _Posted(usage), base_usage={}
    )
    recorder.program = _RemoteProgram()
    happened: set[str] = set()
    position, kind = -1, "traces"
    try:
        with transaction.atomic():
            # any post says the code is alive (a keepalive carries nothing else)
            Run.objects.filter(pk=run.pk, status=Run.RUNNING).update(heartbeat_at=timezone.now())
            if calls and run.status == Run.RUNNING:
                _store_traces(run, calls)
            for position, event in enumerate(batch):
                kind = event.get("type") if isinstance(event, dict) else None
                if kind not in EVENT_KINDS:
                    raise CodeRunError(f"events[{position}] has no known type", "events")
                _check(event)
                if kind == "batch_end" and _next_kind(batch, position) == "batch_end":
                    recorder.note(event)  # its point on the chart; one write for both
                elif kind == "evaluation":
                    _store_evaluation(run, event)
                    happened.add(events.EVALUATION)
                elif kind == "train_end":
                    _finish(run, event, recorder)
                elif run.status == Run.RUNNING and recorder.store(event) is not None:
                    happened.add(kind)
    except CodeRunError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError, DatabaseError) as exc:
        where = "traces" if position < 0 else f"events[{position}] ({kind})"
        raise CodeRunError(
            f"{where} is not what the engine sends: {exc!r}"[:300],
            "traces" if position < 0 else "events",
        ) from None
    run.refresh_from_db()
    if happened and run.status == Run.RUNNING:
        # one send for the batch: the sections its events changed, each rendered once
        async_to_sync(events.stored)(run.group_name, run, *sorted(happened))
    elif happened:  # an evaluation after the fit ended: its figures and the verdict
        events.run_changed(run, *sorted(happened), events.STATUS)
    return {"stop": bool(run.cancel_requested), "status": run.status}


def _check(event: dict[str, Any]) -> None:
    """What the pages read of a candidate, checked before it is stored: its value is a
    variable's (a JSON object), its ids and operation are short texts."""
    if event.get("type") != "candidate":
        return
    if not isinstance(event.get("value"), dict):
        raise ValueError("a candidate's value is a JSON object")
    parents = event.get("parent_ids") or []
    if not isinstance(parents, list) or len(parents) > MAX_PARENTS:
        raise ValueError(f"a candidate has at most {MAX_PARENTS} parent ids")
    for key, most in (("candidate_id", 50), ("operation", 20), ("variable", 200)):
        if len(str(event.get(key) or "")) > most:
            raise ValueError(f"a candidate's {key} has at most {most} characters")


def _next_kind(batch: list[Any], position: int) -> Any:
    following = batch[position + 1] if position + 1 < len(batch) else None
    return following.get("type") if isinstance(following, dict) else None


def _finish(run: Run, event: dict[str, Any], recorder: Any) -> None:
    """``train_end``: the trained program, the best reward, the verdict; the run ends."""
    program = event.get("program")
    if program is not None:
        try:
            program, _ = program_services.parse_import(json.dumps(program).encode("utf-8"))
        except program_services.ProgramError as exc:
            raise ValueError(f"the trained program cannot be read: {exc}") from None
    config = {**run.config, "kept_seed": bool(event.get("kept_seed", True))}
    fields = recorder.usage_fields()
    calls, failures = fields.get("lm_calls") or 0, fields.get("lm_failures") or 0
    error = ""
    if run.cancel_requested:
        status = Run.CANCELLED
    elif calls and failures >= calls:  # as a worker's run: a fit whose every call failed
        status, error = Run.FAILED, f"every LM call of the fit failed ({failures} of {calls})"
    else:
        status = Run.SUCCEEDED
    logs = EpochLog.objects.filter(run_id=run.pk)
    best = summaries.best_of_history(summaries.history(logs)["series"])
    with transaction.atomic():
        Run.objects.filter(pk=run.pk, status=Run.RUNNING).update(config=config)
        run_state.finish(
            run.pk,
            run.attempt,
            status,
            trained_program_json=program,
            best_reward=best,
            outcome=_outcome(run.pk, config) if status == Run.SUCCEEDED else "",
            error=error,
            **fields,
        )


def _store_evaluation(run: Run, event: dict[str, Any]) -> None:
    """An evaluation the code made with the monitor: before fit, or after it (the run may
    have ended then: its after figures and verdict follow)."""
    phase = str(event.get("phase"))
    if phase not in (Evaluation.BEFORE, Evaluation.AFTER):
        raise ValueError("phase is before or after")
    rewards = [float(r) for r in event.get("example_rewards") or []]
    if any(not 0.0 <= r <= 1.0 for r in rewards):
        raise ValueError("example_rewards are between 0 and 1")
    rows = event.get("rows")
    if isinstance(rows, list) and rows:
        code_datasets.add_test_rows(run.dataset, [r for r in rows if isinstance(r, dict)])
    predictions = [p if isinstance(p, dict) else None for p in event.get("predictions") or []]
    errors = [str(e)[:500] if e is not None else None for e in event.get("errors") or []]
    persistence.store_evaluation(
        run.pk,
        run.attempt,
        phase,
        _count(event.get("index")) or 0,
        {k: v for k, v in (event.get("logs") or {}).items() if _number(v)},
        sum(1 for p in predictions if p is None),
        {},
        rewards,
        predictions,
        errors,
        statuses=(Run.RUNNING, *Run.FINISHED),
    )
    run.refresh_from_db()
    if run.status == Run.SUCCEEDED and "kept_seed" in run.config:
        Run.objects.filter(pk=run.pk).update(outcome=_outcome(run.pk, run.config))


def _outcome(run_id: int, config: dict[str, Any]) -> str:
    evaluations = Evaluation.objects.filter(run_id=run_id)
    return summaries.outcome(evaluations, bool(config.get("kept_seed", True)))


def _store_traces(run: Run, calls: list[Any]) -> None:
    """The calls the code traced, bounded and scrubbed as the engine records them
    (``tracing.TraceRecorder``), kept up to the run's trace cap like a worker's."""
    with transaction.atomic():
        stored = LMCallTrace.objects.filter(run_id=run.pk)
        room = max(0, traces.max_calls() - stored.count())
        recorder = tracing.TraceRecorder(max_calls=room, max_chars=traces.max_chars())
        for call in calls:
            recorder.add_values(_trace_values(call))
        base = stored.aggregate(last=Max("seq"))["last"] or 0
        LMCallTrace.objects.bulk_create(
            [traces.trace_row(run.pk, run.attempt, base, record) for record in recorder.records]
        )
        if recorder.dropped:
            Run.objects.filter(pk=run.pk).update(
                traces_dropped=F("traces_dropped") + recorder.dropped
            )


def _trace_values(call: Any) -> dict[str, Any]:
    """A posted trace's fields of the engine's record, each of its type (else its default)."""
    values = {}
    for name, spec in tracing.CallTrace.__dataclass_fields__.items():
        default = (
            spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()
        )
        given = call.get(name) if isinstance(call, dict) else None
        if name == "messages":
            given = [m for m in given if isinstance(m, dict)] if isinstance(given, list) else []
        elif isinstance(default, bool):
            given = given if isinstance(given, bool) else default
        elif isinstance(default, int | float):
            given = given if _number(given) else default
        elif given is not None and not isinstance(given, str | int):
            given = str(given)
        values[name] = given if given is not None or default is None else default
    return values


def _config(
    summary: dict[str, Any], params: dict[str, Any], body: dict[str, Any], rows: int, total: int
) -> dict[str, Any]:
    """The run's config as the pages read it, from what the fit reported."""
    optimizer = body.get("optimizer") if isinstance(body.get("optimizer"), dict) else {}
    reward = body.get("reward") if isinstance(body.get("reward"), dict) else {}
    samples = _count(params.get("samples")) or rows
    validation = _count(params.get("validation_samples")) or 0
    selection = _count(params.get("selection_samples")) or 0
    whole = max(1, samples + validation + selection)
    return {
        "model": summary.get("model") or "",
        "reward": {"name": str(reward.get("name") or "")[:100]},
        "metrics": [],
        "epochs": _count(params.get("epochs")) or 1,
        "batch_size": _count(params.get("batch_size")) or 1,
        "validation_split": round(validation / whole, 4),
        "selection_split": round(selection / whole, 4),
        "shuffle": bool(params.get("shuffle", True)),
        "seed": _count(params.get("seed")),
        "evaluations_before": 0,
        "evaluations_after": 0,
        "optimizer": {
            "name": str(optimizer.get("name") or "")[:100],
            "params": {
                str(k)[:100]: v
                for k, v in (optimizer.get("params") or {}).items()
                if v is None or isinstance(v, bool | int | float | str)
            },
        },
        run_config.TRAINING_ORDER[0]: run_config.FILE_ORDER,  # as the code gave them
        "rows_sent": rows,
        "rows_total": max(rows, total or 0),
    }


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return max(0, min(int(value), 2**31 - 1))


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class _Posted:
    """The usage the code reported, as the persistence callback reads a tracker."""

    def __init__(self, usage: dict[str, Any]) -> None:
        self.usage = usage

    def to_dict(self) -> dict[str, Any]:
        return dict(self.usage)


class _RemoteProgram:
    """The program as the persistence callback sees it for a run from code: its state
    lives in the code (no checkpoint here), and a Cancel sets ``stop_training``, which
    :func:`apply` answers to the code."""

    stop_training = False
    pause_requested = False
    failed_predictions = 0
    optimizer = None

    def get_config(self) -> None:
        return None
