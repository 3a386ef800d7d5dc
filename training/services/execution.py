"""Executing a run in a worker: baseline evaluations, fit, final evaluations.

``execute(run_id, attempt)`` is what the Celery task calls. It claims the run (queued →
running, only for the current attempt, so a redelivered or stale message does nothing),
starts a heartbeat thread, and drives the engine's async API in ``asyncio.run``. A resumed
run restarts from its checkpoint (variables, candidates and optimizer state after the last
completed epoch) with ``initial_epoch``; evaluations already stored are not repeated.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

import training.engine as synalinks
from datasets.services import get_split
from training import conf
from training.engine.data_model import create_data_model
from training.models import Candidate, EpochLog, Evaluation, OptimizerError, Run
from training.services import live, reaper, summaries
from training.services.lm import describe_address
from training.services.persistence import PersistenceCallback
from training.services.programs import first_generator, sanitize_engine_json
from training.services.run_config import build_metrics, build_optimizer, build_reward

logger = logging.getLogger(__name__)


def heartbeat_seconds() -> float:
    return float(conf.get("TRAINBOARD_HEARTBEAT_SECONDS"))


class Heartbeat(threading.Thread):
    """Writes ``heartbeat_at`` every few seconds while the run executes, and reaps others.

    A thread, not the event loop: a long LM call must not look like a dead worker. If the
    process is killed the thread dies with it, the heartbeat stops, and the reaper (here in
    another worker, or in the web process) marks the run "failed: worker lost".

    The reaper can also fail a run whose worker is alive (its heartbeat writes blocked for
    longer than the stale limit, e.g. by a SQLite lock), and the user may then resume it. So
    each beat checks that the run is still RUNNING for this attempt; when it is not, it sets
    ``superseded``, which the persistence callback reads after every batch to stop training
    and write nothing more (two attempts must never write the same run's rows).
    """

    def __init__(self, run_id: int, attempt: int, superseded: threading.Event | None = None):
        super().__init__(name=f"run-{run_id}-heartbeat", daemon=True)
        self.run_id, self.attempt = run_id, attempt
        self.stopped = threading.Event()
        self.superseded = superseded if superseded is not None else threading.Event()

    def beat(self) -> bool:
        """One heartbeat; False if it could not be written (retried sooner by ``run``)."""
        try:
            alive = Run.objects.filter(
                pk=self.run_id, attempt=self.attempt, status=Run.RUNNING
            ).update(heartbeat_at=timezone.now())
        except DatabaseError as exc:  # "database is locked" for a moment: log, retry
            logger.warning("run %s: heartbeat not written (%s); retrying", self.run_id, exc)
            connection.close_if_unusable_or_obsolete()
            return False
        if not alive and not self.superseded.is_set():
            logger.warning(
                "run %s attempt %s: no longer running for this attempt (reaped or resumed "
                "elsewhere); stopping it without further writes",
                self.run_id,
                self.attempt,
            )
            self.superseded.set()
        try:
            reaper.reap_stale()
        except Exception:  # another run's reaping must not stop this run's heartbeat
            logger.exception("run %s: reaping from the heartbeat failed", self.run_id)
        return True

    def run(self) -> None:
        interval = heartbeat_seconds()
        try:
            delay = interval
            while not self.stopped.wait(delay):
                try:
                    delay = interval if self.beat() else min(1.0, interval)
                except Exception:  # nothing may kill the thread: a dead heartbeat looks lost
                    logger.exception("run %s: heartbeat failed", self.run_id)
                    delay = interval
        finally:
            _close_connection()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)


def claim(run_id: int, attempt: int, worker: str) -> bool:
    now = timezone.now()
    return bool(
        Run.objects.filter(pk=run_id, attempt=attempt, status=Run.QUEUED).update(
            status=Run.RUNNING,
            started_at=Coalesce("started_at", now),
            heartbeat_at=now,
            finished_at=None,
            worker=worker,
            worker_pid=os.getpid(),
            error="",
            phase="starting",
        )
    )


def finish(run_id: int, attempt: int, status: str, **fields: Any) -> None:
    """Final state of this attempt (never overwrites a run the reaper already failed)."""
    updated = Run.objects.filter(pk=run_id, attempt=attempt, status=Run.RUNNING).update(
        status=status, finished_at=timezone.now(), heartbeat_at=timezone.now(), phase="", **fields
    )
    if updated:
        live.broadcast_run(run_id)


def fail_attempt(run_id: int, attempt: int, error: str) -> bool:
    """Fail an attempt that is still queued or running; True if this call changed it."""
    updated = Run.objects.filter(
        pk=run_id, attempt=attempt, status__in=[Run.QUEUED, Run.RUNNING]
    ).update(status=Run.FAILED, error=error, finished_at=timezone.now(), phase="")
    if updated:
        live.broadcast_run(run_id)
    return bool(updated)


def execute(run_id: int, attempt: int, worker: str = "") -> str:
    """Run one attempt of a run to the end; returns the final status (or "skipped")."""
    close_old_connections()
    if not claim(run_id, attempt, worker):
        logger.info("run %s attempt %s: not queued any more, skipping", run_id, attempt)
        return "skipped"
    run = Run.objects.select_related("program", "dataset").get(pk=run_id)
    live.broadcast(run, ("status", "actions", "progress"))
    heartbeat = Heartbeat(run_id, attempt)
    heartbeat.start()
    try:
        status, fields = asyncio.run(_train_then_close(run, heartbeat.superseded))
    except synalinks.LanguageModelUnreachable as exc:
        status, fields = Run.FAILED, {"error": _unreachable_message(run, exc)}
    except Exception as exc:
        logger.exception("run %s failed", run_id)
        status, fields = Run.FAILED, {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        heartbeat.stop()
    if heartbeat.superseded.is_set():
        close_old_connections()
        return "superseded"  # the run is no longer this attempt's: leave its state alone
    finish(run_id, attempt, status, **fields)
    close_old_connections()
    return status


def _unreachable_message(run: Run, exc: Exception) -> str:
    try:
        from training.services.programs import program_from_json

        generator = first_generator(program_from_json(run.program.engine_json))
        lm = generator.language_model if generator else None
    except Exception:
        lm = None
    model = getattr(lm, "model", run.model_name)
    return f"Language model {model!r} is unreachable at {describe_address(lm)}: {exc}"


def _data_models(program: Any, dataset: Any) -> tuple[type, type]:
    input_model = program.inputs[0].data_model
    target_model = create_data_model("Target", dataset.target_schema_fields())
    return input_model, target_model


def _to_models(rows_x: list[dict], rows_y: list[dict], input_model: type, target_model: type):
    input_names = list(input_model.model_fields)
    x = [input_model(**{name: row.get(name) for name in input_names}) for row in rows_x]
    y = [target_model(**row) for row in rows_y]
    return x, y


def _drop_unfinished_epochs(run: Run) -> None:
    """Before a resume: delete what an abandoned, partial epoch left behind.

    The checkpoint is the state after epoch ``checkpoint_epoch`` (engine epochs, 0-based,
    as EpochLog and Candidate.epoch store them). Rows of later epochs come from an attempt
    that stopped mid-epoch; the resumed optimizer restarts its candidate ids from the
    checkpoint's ``candidate_count``, so those rows would be ghosts (or be half-overwritten).
    """
    if run.checkpoint_json is None or run.checkpoint_epoch is None:
        return
    with transaction.atomic():
        later = {"run_id": run.pk, "epoch__gt": run.checkpoint_epoch}
        Candidate.objects.filter(**later).delete()
        OptimizerError.objects.filter(**later).delete()
        EpochLog.objects.filter(**later).delete()


def _load(run: Run) -> dict[str, Any]:
    """Everything the async part needs from the database, read in one sync call."""
    _drop_unfinished_epochs(run)
    return {
        "config": run.config,
        # Stored JSON may be an upload: never let it choose caches or unbounded LM settings.
        "document": sanitize_engine_json(run.checkpoint_json or run.program.engine_json),
        "resume_epoch": (run.checkpoint_epoch + 1) if run.checkpoint_json is not None else 0,
        "train": get_split(run.dataset, "train"),
        "test": get_split(run.dataset, "test"),
        "dataset": run.dataset,
        "done_evaluations": set(run.evaluations.values_list("phase", "index")),
        "base_usage": dict(run.usage or {}),
        "group": run.group_name,
    }


def _close_connection() -> None:
    try:
        connection.close()
    except DatabaseError:  # shared with another thread (test databases): not ours to close
        pass


async def _train_then_close(
    run: Run, superseded: threading.Event | None = None
) -> tuple[str, dict[str, Any]]:
    try:
        return await _train(run, superseded)
    finally:  # the ORM thread's connection must not outlive the task (prefork reuses it)
        await sync_to_async(_close_connection)()


async def _train(run: Run, superseded: threading.Event | None = None) -> tuple[str, dict[str, Any]]:
    data = await sync_to_async(_load)(run)
    config = data["config"]
    program = synalinks.Program.from_config(data["document"], compile=False)
    optimizer = build_optimizer(config)
    compile_config = data["document"].get("compile") or {}
    state = (compile_config.get("optimizer") or {}).get("state") if run.checkpoint_json else None
    if state:
        optimizer.set_state(state)
    program.compile(reward=build_reward(config), optimizer=optimizer, metrics=build_metrics(config))
    input_model, target_model = _data_models(program, data["dataset"])
    x_train, y_train = _to_models(*data["train"], input_model, target_model)
    x_test, y_test = _to_models(*data["test"], input_model, target_model)
    batch_size = int(config["batch_size"])

    with synalinks.usage.track() as tracker:
        callback = PersistenceCallback(
            run.pk, run.attempt, data["group"], tracker, data["base_usage"], superseded=superseded
        )
        callback.set_program(program)

        async def evaluations(phase: str, count: int) -> bool:
            """Run the missing evaluations of a phase; False if cancelled meanwhile."""
            for index in range(count):
                if (phase, index) in data["done_evaluations"]:
                    continue
                if callback.superseded.is_set() or await sync_to_async(_cancel_requested)(run.pk):
                    return False
                await live.send(
                    data["group"],
                    await sync_to_async(_set_phase)(
                        run.pk, run.attempt, f"{phase} eval {index + 1}/{count}"
                    ),
                )
                failed_before = program.failed_predictions
                logs = await program.evaluate(x_test, y_test, batch_size=batch_size)
                html = await sync_to_async(_store_evaluation)(
                    run.pk,
                    run.attempt,
                    phase,
                    index,
                    logs,
                    program.failed_predictions - failed_before,
                    callback.usage_fields(),
                )
                if html is None:  # superseded meanwhile: nothing was stored
                    callback.superseded.set()
                    return False
                await live.send(data["group"], html)
            return True

        if x_test and not await evaluations(Evaluation.BEFORE, int(config["evaluations_before"])):
            return Run.CANCELLED, await sync_to_async(_results)(run.pk, program, callback)
        if not x_train:
            raise ValueError(f"dataset {data['dataset'].name!r} has no training rows")
        await program.fit(
            x=x_train,
            y=y_train,
            validation_split=float(config["validation_split"]),
            epochs=int(config["epochs"]),
            batch_size=batch_size,
            shuffle=bool(config["shuffle"]),
            callbacks=[callback],
            initial_epoch=min(data["resume_epoch"], int(config["epochs"])),
            seed=int(config["seed"]),
        )
        if (
            callback.cancelled
            or callback.superseded.is_set()
            or await sync_to_async(_cancel_requested)(run.pk)
        ):
            return Run.CANCELLED, await sync_to_async(_results)(run.pk, program, callback)
        if x_test and not await evaluations(Evaluation.AFTER, int(config["evaluations_after"])):
            return Run.CANCELLED, await sync_to_async(_results)(run.pk, program, callback)
        results = await sync_to_async(_results)(run.pk, program, callback)
        results["samples"] = await _samples(program, x_test, y_test)
        results.update(callback.usage_fields())
        return Run.SUCCEEDED, results


async def _samples(program: Any, x: list, y: list) -> list[dict[str, Any]]:
    """The trained program's answers on the first few test examples (shown escaped)."""
    count = int(conf.get("TRAINBOARD_SAMPLE_PREDICTIONS"))
    if not x or count <= 0:
        return []
    predictions = await program.predict(x[:count], batch_size=count)
    return [
        {
            "inputs": item.get_json(),
            "expected": truth.get_json(),
            "predicted": prediction.get_json() if prediction is not None else None,
        }
        for item, truth, prediction in zip(x[:count], y[:count], predictions, strict=False)
    ]


def _cancel_requested(run_id: int) -> bool:
    return bool(Run.objects.filter(pk=run_id).values_list("cancel_requested", flat=True).first())


def _set_phase(run_id: int, attempt: int, phase: str) -> str:
    # The column is short (it labels a progress bar); PostgreSQL refuses longer values.
    phase = phase[: Run._meta.get_field("phase").max_length]
    Run.objects.filter(pk=run_id, attempt=attempt, status=Run.RUNNING).update(
        phase=phase, heartbeat_at=timezone.now()
    )
    run = Run.objects.select_related("program").get(pk=run_id)
    return live.render_parts(run, ("status", "progress"))


def _store_evaluation(
    run_id: int, attempt: int, phase: str, index: int, logs: dict, failures: int, usage: dict
) -> str | None:
    metrics = {key: float(value) for key, value in logs.items() if isinstance(value, int | float)}
    with transaction.atomic():
        # Touching the run first (this attempt, still running) locks its row and tells a
        # superseded attempt apart: that one stores nothing (None).
        if not Run.objects.filter(pk=run_id, attempt=attempt, status=Run.RUNNING).update(
            heartbeat_at=timezone.now()
        ):
            return None
        Evaluation.objects.update_or_create(
            run_id=run_id,
            phase=phase,
            index=index,
            defaults={"metrics": metrics, "failures": failures},
        )
        rewards = list(
            Evaluation.objects.filter(run_id=run_id, phase=phase).values_list(
                "metrics__reward", flat=True
            )
        )
        mean, _ = summaries.mean_std([float(value) for value in rewards if value is not None])
        field = "baseline_reward" if phase == Evaluation.BEFORE else "final_reward"
        Run.objects.filter(pk=run_id, attempt=attempt).update(**{field: mean}, **usage)
    run = Run.objects.select_related("program").get(pk=run_id)
    return live.render_parts(run, ("evaluations", "usage", "status"))


def _results(run_id: int, program: Any, callback: PersistenceCallback) -> dict[str, Any]:
    logs = EpochLog.objects.filter(run_id=run_id)
    best = summaries.best_of_history(summaries.history(logs)["series"])
    return {
        "trained_program_json": program.get_config(),
        "best_reward": best,
        **callback.usage_fields(),
    }
