"""Executing a run in a worker: baseline evaluations, fit, final evaluations.

``execute(run_id, attempt)`` is what the Celery task calls. It claims the run (queued →
running, only for the current attempt, so a redelivered or stale message does nothing),
starts a heartbeat thread, waits (phase "loading models") while its worker still loads the
local models the run uses (``model_loading``), and drives the engine's async API in
``asyncio.run``. A resumed run restarts from its checkpoint (variables, candidates and
optimizer state after the last completed epoch, or at the batch a pause stopped at: then with
the engine's pause point, ``fit(resume_from=...)``) with ``initial_epoch``; evaluations already
stored are not repeated.

This module only orchestrates: the attempt's state transitions are ``run_state``'s, its
heartbeat is ``heartbeat``'s, storing what it produces is ``persistence``'s, and ``events``
says what changed (``training.insight.live`` renders and sends it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections

import training.engine as synalinks
from datasets.services import get_split
from datasets.versions import human_marks
from training import conf
from training.engine.data_model import create_data_model
from training.engine.language_models.limits import rate_limits
from training.engine.trainers.pause_point import PausePoint
from training.execution import (
    budget,
    events,
    model_loading,
    prediction_failures,
    run_config,
    run_state,
)
from training.execution.liveness.heartbeat import Heartbeat, close_connection
from training.execution.pace import cpu_meter, learning
from training.execution.rate_limit_notice import RateLimitNotice
from training.execution.recording import persistence, traces
from training.execution.recording.persistence import PersistenceCallback
from training.execution.run_config import (
    build_metrics,
    build_optimizer,
    build_reward,
    evaluate_kwargs,
    evaluation_passes,
    fit_kwargs,
    judge_calls,
)
from training.models import Evaluation, Run
from training.programs.lm import describe_address
from training.programs.programs import (
    ProgramError,
    callable_document,
    first_generator,
    program_from_json,
    program_language_model,
)

logger = logging.getLogger(__name__)
#: How often a running attempt looks for its run's Cancel (seconds): pressed, the program is
#: interrupted at once (``program.interrupt()``: pending predictions dropped, in every phase).
CANCEL_CHECK_SECONDS = 1.0
cancel_requested = sync_to_async(run_state.cancel_requested)
_results = sync_to_async(persistence.results)


async def results(
    run_id: int, program: Any, callback: PersistenceCallback, watch: Any = None
) -> dict[str, Any]:
    """The final fields of an attempt, its usage holding how many predictions it made and
    why the failed ones failed (``prediction_failures.usage_fields``), and the working time
    of the run's attempts so far (``watch``: the attempt's ``budget.BudgetWatch``)."""
    fields = await _results(run_id, program, callback)
    fields["usage"].update(prediction_failures.usage_fields(program, callback.base_usage))
    if watch is not None:
        fields["active_seconds"] = watch.seconds()
    return fields


def execute(run_id: int, attempt: int, worker: str = "") -> str:
    """Run one attempt of a run to the end; returns the final status (or "skipped")."""
    close_old_connections()
    if not run_state.claim(run_id, attempt, worker):
        logger.info("run %s attempt %s: not queued any more, skipping", run_id, attempt)
        return "skipped"
    run = Run.objects.select_related("program", "program_version", "dataset").get(pk=run_id)
    events.run_changed(run, events.STATUS)
    heartbeat = Heartbeat(run_id, attempt)
    heartbeat.start()
    cpu_started = cpu_meter.sample()  # the machine's load over the attempt
    try:
        status, fields = asyncio.run(_train_then_close(run, heartbeat.superseded))
    except rate_limits.ProviderLimitTimeout as exc:  # saturated, not unreachable
        status, fields = Run.FAILED, {"error": f"Waited too long for the provider: {exc}"}
    except synalinks.LanguageModelUnreachable as exc:
        status, fields = Run.FAILED, {"error": _unreachable_message(run, exc)}
    except ProgramError as exc:  # a stored program this server refuses to build (its models)
        status, fields = Run.FAILED, {"error": f"This program cannot run here: {exc}"}
    except Exception as exc:
        logger.exception("run %s failed", run_id)
        status, fields = Run.FAILED, {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        heartbeat.stop()
    if heartbeat.superseded.is_set():
        close_old_connections()
        return "superseded"  # the run is no longer this attempt's: leave its state alone
    run_state.finish(run_id, attempt, status, **fields)
    # what the run observed per call, for the next forecasts of its model
    learning.learn_from_run(run_id, (cpu_started, cpu_meter.sample()))
    close_old_connections()
    return status


def _unreachable_message(run: Run, exc: Exception) -> str:
    try:
        generator = first_generator(program_from_json(run.launch_json))
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
    # Each target knows its example's inputs: people's marks on one example match only it.
    y = [
        synalinks.rewards.attach_inputs(target_model(**row), item)
        for row, item in zip(rows_y, x, strict=True)
    ]
    return x, y


def _load(run: Run) -> dict[str, Any]:
    """Everything the async part needs from the database, read in one sync call."""
    run_state.drop_unfinished_epochs(run)
    return {
        "config": run.config,
        # Stored JSON may be an upload: never let it choose caches or unbounded LM settings;
        # models on saved endpoints get their URL and key here, in memory only.
        "document": callable_document(run.checkpoint_json or run.launch_json, run.owner),
        "resume_epoch": resume_epoch(run),
        # Paused inside an epoch: where fit goes on (the engine's PausePoint, as stored).
        "resume_from": run.checkpoint_position if run.checkpoint_json is not None else None,
        "train": get_split(run.dataset, "train", run_config.spreads_by_label(run.config)),
        "test": get_split(run.dataset, "test"),
        "dataset": run.dataset,
        "marks": human_marks(run.dataset),  # people's marks, for a "judge by people" reward
        "done_evaluations": set(run.evaluations.values_list("phase", "index")),
        "base_usage": dict(run.usage or {}),
        "active_seconds": run.active_seconds,
        "group": run.group_name,
    }


def resume_epoch(run: Run) -> int:
    """The epoch a resumed attempt starts in: the one a pause stopped inside, else the one
    after the last completed (0: from the start)."""
    if run.checkpoint_json is None:
        return 0
    point = run.checkpoint_position
    if isinstance(point, dict) and isinstance(point.get("epoch"), int):
        return point["epoch"]
    return run.checkpoint_epoch + 1 if run.checkpoint_epoch is not None else 0


async def _train_then_close(
    run: Run, superseded: threading.Event | None = None
) -> tuple[str, dict[str, Any]]:
    try:
        async with traces.recording(run.pk, run.attempt, superseded) as writer:
            return await _train(run, superseded, writer)
    finally:  # the ORM thread's connection must not outlive the task (prefork reuses it)
        await sync_to_async(close_connection)()


async def _train(
    run: Run, superseded: threading.Event | None = None, writer: Any = None
) -> tuple[str, dict[str, Any]]:
    data = await sync_to_async(_load)(run)
    config = data["config"]
    program = synalinks.Program.from_config(data["document"], compile=False)
    program_model = program_language_model(program)
    optimizer = build_optimizer(config, program_model)
    compile_config = data["document"].get("compile") or {}
    state = (compile_config.get("optimizer") or {}).get("state") if run.checkpoint_json else None
    if state:
        optimizer.set_state(state)
    reward = build_reward(config, marks=data["marks"], program_model=program_model)
    program.compile(reward=reward, optimizer=optimizer, metrics=build_metrics(config))

    superseded = superseded if superseded is not None else threading.Event()
    with synalinks.usage.track() as tracker:
        steps = Steps(run, data, program, tracker, superseded)
        if writer is not None:  # traces and usage are written together
            steps.callback.traces = writer
            writer.usage = steps.callback.usage_fields
        watch = asyncio.ensure_future(steps.interrupt_on_cancel())
        try:
            return await steps.run()
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)


class Steps:
    """The phases of one attempt, as named steps: wait for the models, the evaluations
    before, fit, the evaluations after, the sample answers.

    ``run()`` goes through them and returns the attempt's final status and fields:
    CANCELLED as soon as one is interrupted, PAUSED when Pause stopped fit after a batch, FAILED as soon as one made predictions that all
    failed (``prediction_failures``), STOPPED at a budget cap (``budget.BudgetWatch``).
    Whether to stop (the run's Cancel, or the attempt superseded) is asked in one place,
    ``stop_requested``.

    Args:
        run: the run, as claimed for this attempt.
        data: what ``_load`` read for it (config, splits, done evaluations, usage so far).
        program: the compiled program.
        tracker: the attempt's ``synalinks.usage`` tracker.
        superseded: set when the run stops being this attempt's (heartbeat, persistence).
    """

    def __init__(
        self, run: Run, data: dict, program: Any, tracker: Any, superseded: threading.Event
    ):
        self.run_id, self.attempt, self.group = run.pk, run.attempt, data["group"]
        self.run_row = run
        self.data = data
        self.config = data["config"]
        self.program = program
        input_model, target_model = _data_models(program, data["dataset"])
        self.x_train, self.y_train = _to_models(*data["train"], input_model, target_model)
        self.x_test, self.y_test = _to_models(*data["test"], input_model, target_model)
        self.callback = PersistenceCallback(
            run.pk, run.attempt, data["group"], tracker, data["base_usage"], superseded=superseded
        )
        self.callback.set_program(program)
        # A pause's epoch is judged whole: its predictions before the pause are the point's.
        point = data["resume_from"]
        self.failed_epochs = prediction_failures.AllFailedEpochs(
            resumed_from=PausePoint.from_json(point) if point is not None else None
        )
        self.failure: list[str] = []  # the error of an evaluation whose predictions all failed
        self.watch = budget.BudgetWatch(
            run.pk,
            run.attempt,
            budget.caps_of(self.config),
            self.callback.usage_fields,
            data["active_seconds"],
        )
        # The caps as the engine holds them: no LM call starts that a cap cannot afford.
        self.budget = budget.call_budget(
            self.watch.caps, data["base_usage"], data["active_seconds"], self.watch.started
        )

    async def stop_requested(self) -> bool:
        """The run's Cancel was pressed, or the run is no longer this attempt's."""
        return self.callback.superseded.is_set() or await cancel_requested(self.run_id)

    async def interrupt_on_cancel(self) -> None:
        """Interrupt the program as soon as ``stop_requested`` (polled every
        ``CANCEL_CHECK_SECONDS``)."""
        while not self.program.interrupted:
            if await self.stop_requested():
                self.program.interrupt()
                return
            await asyncio.sleep(CANCEL_CHECK_SECONDS)

    async def run(self) -> tuple[str, dict[str, Any]]:
        notice = RateLimitNotice(self.run_id, self.attempt, self.group)
        try:
            with rate_limits.watching_waits(notice):  # "rate limited" while calls wait
                if self.budget is None:
                    return await self.steps()
                with self.budget.applied():
                    return await self.steps()
        finally:
            await notice.close()

    def held_for_after(self, after: int) -> Any:
        """While the evaluations before and fit run, the calls of the evaluations after
        training are held back (``budget.after_evaluation_calls``), so that a capped run can
        still evaluate its best program; nothing held without a calls cap."""
        if self.budget is None or self.budget.calls is None or not self.x_test:
            return contextlib.nullcontext()
        judge = judge_calls(self.config)
        modules = [m for m in self.program.modules if getattr(m, "language_model", None)]
        calls = budget.after_evaluation_calls(after, len(self.x_test), len(modules), judge)
        return self.budget.holding(calls=min(calls, self.budget.calls))

    async def steps(self) -> tuple[str, dict[str, Any]]:
        before, after = evaluation_passes(self.config)
        if not await self.wait_for_models():
            return Run.CANCELLED, await self.results(with_time=False)
        with self.held_for_after(after):
            if self.x_test and not await self.evaluations(Evaluation.BEFORE, before):
                return self.stopped(await self.results())
            if not self.x_train:
                raise ValueError(f"dataset {self.data['dataset'].name!r} has no training rows")
            await self.fit()
        if self.program.interrupted or self.callback.cancelled or await self.stop_requested():
            return Run.CANCELLED, await self.results()
        if self.callback.paused:  # Pause: fit paused after a batch, the checkpoint saved
            return Run.PAUSED, await self.results()
        if self.program.budget_exhausted is not None:
            await self.watch.refused(self.program.budget_exhausted)
        if self.watch.reached:  # stopped at a cap: everything kept, the best program evaluated
            return await self.capped(after)
        if self.failed_epochs.error is not None:
            self.failure.append(self.failed_epochs.error)
            return self.stopped(await self.results())
        if self.x_test and not await self.evaluations(Evaluation.AFTER, after):
            return self.stopped(await self.results())
        samples = await _samples(self.program, self.x_test, self.y_test)
        fields = await self.results()  # the samples' calls too
        fields["outcome"] = await sync_to_async(persistence.outcome)(self.run_id, self.program)
        return Run.SUCCEEDED, {**fields, "samples": samples}

    async def wait_for_models(self) -> bool:
        """Phase "loading models" while the worker still loads the ones the run uses."""
        return await model_loading.wait_for_models(
            self.run_row, self.group, model_loading.models_of(self.config), self.stop_requested
        )

    async def fit(self) -> None:
        callbacks = [
            self.callback,
            self.failed_epochs,
            *([self.watch] if self.watch.active else []),
        ]
        await self.program.fit(
            x=self.x_train,
            y=self.y_train,
            callbacks=callbacks,
            **fit_kwargs(
                self.config,
                resume_epoch=self.data["resume_epoch"],
                resume_from=self.data["resume_from"],
            ),
        )

    async def capped(self, after: int) -> tuple[str, dict[str, Any]]:
        """STOPPED at a cap, with the best program so far evaluated on the test split when
        the budget held enough for it (its calls were held back), else saying it was skipped."""
        note = None
        if self.x_test and after > 0:
            evaluated = await self.evaluations(Evaluation.AFTER, after, capped=True)
            note = "evaluated" if evaluated else "skipped"
            await self.watch.check()  # the message counts the evaluation's calls too
        return Run.STOPPED, {**await self.results(), "error": self.watch.message_after(note)}

    async def evaluations(self, phase: str, count: int, capped: bool = False) -> bool:
        """Run the missing evaluations of a phase; False if cancelled or failed meanwhile.

        ``capped``: fit stopped at a cap and these are the evaluations after it, paid by the
        calls held back for them (the engine budget refuses what they cannot afford)."""
        for index in range(count):
            if (phase, index) in self.data["done_evaluations"]:
                continue
            if await self.stop_requested():
                return False
            if not capped and self.watch.active and await self.watch.check():
                return False  # a cap: stop before the next pass
            if not await self.evaluation(phase, index, count):
                return False
        return True

    async def evaluation(self, phase: str, index: int, count: int) -> bool:
        """One pass over the test split, stored and sent; False if interrupted, failed or
        superseded meanwhile."""
        program = self.program
        labelled = await sync_to_async(run_state.set_phase)(
            self.run_id, self.attempt, f"{phase} eval {index + 1}/{count}"
        )
        await events.stored(self.group, labelled, events.PHASE)
        failed_before = program.failed_predictions
        mark = prediction_failures.Mark.of(program)
        per_example = synalinks.callbacks.ExampleRewards(predictions=True)
        with traces.evaluation_context(phase):
            logs = await program.evaluate(
                self.x_test,
                self.y_test,
                **evaluate_kwargs(self.config),
                callbacks=[per_example],
            )
        if program.interrupted:  # cancelled mid-evaluation: its partial logs are dropped
            return False
        if program.budget_exhausted is not None:  # a cap refused a call: dropped as well
            await self.watch.refused(program.budget_exhausted)
            return False
        error = prediction_failures.all_failed(
            program, mark, f"the {phase}-training evaluation {index + 1}"
        )
        if error is not None:
            self.failure.append(error)
            return False
        stored = await sync_to_async(persistence.store_evaluation)(
            self.run_id,
            self.attempt,
            phase,
            index,
            logs,
            program.failed_predictions - failed_before,
            await self.callback.store_traces(),
            per_example.rewards,
            per_example.predictions,
            per_example.errors,
        )
        if stored is None:  # superseded meanwhile: nothing was stored
            self.callback.superseded.set()
            return False
        await events.stored(self.group, stored, events.EVALUATION)
        return True

    async def results(self, with_time: bool = True) -> dict[str, Any]:
        """The attempt's final fields (``with_time``: with the working time of its run)."""
        watch = self.watch if with_time else None
        return await results(self.run_id, self.program, self.callback, watch)

    def stopped(self, fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """FAILED with the error of a phase whose predictions all failed, STOPPED at a budget
        cap (``watch.reached``), else CANCELLED."""
        if self.failure:
            return Run.FAILED, {**fields, "error": self.failure[0]}
        if self.watch.reached:
            return Run.STOPPED, {**fields, "error": self.watch.message}
        return Run.CANCELLED, fields


async def _samples(program: Any, x: list, y: list) -> list[dict[str, Any]]:
    """The trained program's answers on the first few test examples (shown escaped)."""
    count = int(conf.get("TRAINBOARD_SAMPLE_PREDICTIONS"))
    if not x or count <= 0:
        return []
    with traces.evaluation_context("samples"):
        predictions = await program.predict(x[:count], batch_size=count)
    return [
        {
            "inputs": item.get_json(),
            "expected": truth.get_json(),
            "predicted": prediction.get_json() if prediction is not None else None,
        }
        for item, truth, prediction in zip(x[:count], y[:count], predictions, strict=False)
    ]
