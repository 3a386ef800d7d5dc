"""Predicting: the half of the trainer that runs the program on inputs, mixed into Program.

``predict`` and every prediction inside ``evaluate`` and ``fit`` go through
``_predict_batch``: the items of a batch run concurrently; a prediction that fails (an LM
error after retries, an output that never parses) becomes ``None`` and is counted, never a
crashed batch; ``interrupt()`` (from any thread) cancels the ones not done within
:data:`STOP_CHECK_SECONDS`. During ``fit`` predictions are memoised by (variables hash,
input JSON) when every generator is deterministic (``Trainer`` sets ``_memo``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import numpy as np

from training.engine import bounds
from training.engine.language_models import tracing
from training.engine.language_models import usage as usage_mod
from training.engine.language_models.budget import BudgetExhausted
from training.engine.language_models.errors import (
    LanguageModelConfigError,
    LanguageModelUnreachable,
    short_message,
)
from training.engine.modules.module import TRACE
from training.engine.trainers.data_adapter import as_object_array

logger = logging.getLogger(__name__)

#: How often a batch of concurrent predictions looks at ``program.interrupted``.
STOP_CHECK_SECONDS = 0.2
#: The error of a prediction whose module gave no output (and raised nothing).
NO_OUTPUT = "the program gave no output"


class Interrupted(BaseException):
    """Unwinds ``fit`` / ``evaluate`` / ``predict`` after ``program.interrupt()``.

    A BaseException (like ``asyncio.CancelledError``) so that code which survives ordinary
    failures (an optimizer's ``except Exception`` around a step) does not swallow it; the three
    entry points catch it and return what had completed."""


class Predicting:
    """Mixin: ``predict``, the concurrent batch of predictions, and ``interrupt``."""

    def interrupt(self) -> None:
        """Stop ``fit``, ``evaluate`` and ``predict`` now, not after the batch.

        Safe to call from another thread (it sets a flag the running batch looks at every
        :data:`STOP_CHECK_SECONDS`). The predictions not finished yet are cancelled, LM calls in
        flight included; ``fit`` ends as if ``stop_training`` had stopped it (``train_end`` with
        ``stopped`` True), ``evaluate`` returns the logs of the batches it completed, ``predict``
        their outputs. Later calls return at once until ``program.interrupted = False``.

        Example:

        ```python
        loop.call_later(5.0, program.interrupt)  # give up after about 5 s
        logs = await program.evaluate(x_test, y_test)
        ```
        """
        self.interrupted = True

    def _check_interrupted(self) -> None:
        if self.interrupted:
            raise Interrupted

    def _budget_stop(self, exc: BudgetExhausted) -> None:
        """A call was refused by a :class:`~training.engine.language_models.budget.CallBudget`:
        stop like ``interrupt()`` (``fit`` keeps its best candidates), and say which cap."""
        self.stop_training = True
        if self.budget_exhausted is None:
            self.budget_exhausted = exc

    # -- predictions -----------------------------------------------------------------------
    def _memo_key(self, item: Any) -> tuple:
        return (
            tuple(variable.hash for variable in self.variables),
            json.dumps(
                item.get_json() if hasattr(item, "get_json") else [i.get_json() for i in item],
                sort_keys=True,
                separators=(",", ":"),
            ),
        )

    async def _predict_one(
        self, item: Any, collect: bool, example_index: int | None = None
    ) -> tuple[Any, list[dict], str | None]:
        if not tracing.active():  # nobody records: no context to set
            return await self._predict_one_traced(item, collect)
        # Traces of the LM calls below name the example; a prediction made for a judge
        # (ProgramAsJudge) keeps the judge's role.
        role = None if tracing.current_role() else "prediction"
        token = tracing.enter_example(role, example_index)  # a lean trace_context(...)
        try:
            return await self._predict_one_traced(item, collect)
        finally:
            tracing.exit_context(token)

    async def _predict_one_traced(
        self, item: Any, collect: bool
    ) -> tuple[Any, list[dict], str | None]:
        """(output, trace, error): ``error`` is None for a usable output, else why it failed
        (redacted, short): the prediction counts as failed."""
        key = None
        if self._memo is not None:
            key = self._memo_key(item)
            hit = self._memo.get(key)
            if hit is not None:
                usage_mod.record(usage_mod.UsageRecord(model="memo", memo_hit=True))
                output, trace = hit
                if tracing.active():
                    tracing.emit(
                        kind="memo",
                        model="memo",
                        memo_hit=True,
                        response=output,
                    )
                return output, trace, None
        trace: list[dict] = []
        token = TRACE.set(trace) if (collect or key is not None) else None
        try:
            output = await self.call(item, training=collect)
            error = NO_OUTPUT if output is None else None
        except (LanguageModelUnreachable, LanguageModelConfigError):
            raise  # every call would fail the same way: stop, don't count each one
        except Exception as exc:  # counted failed prediction, never a crashed batch
            logger.warning("%s: prediction failed: %s", self.name, exc)
            message = short_message(exc)
            self.prediction_errors[message] = self.prediction_errors.get(message, 0) + 1
            output, error = None, message
        finally:
            if token is not None:
                TRACE.reset(token)
        if key is not None and error is None:
            # Only successes are memoised: a one-off failure (a 5xx after retries, a parse
            # failure) must be retried by the next scoring, not replayed and counted again.
            self._memo[key] = (output, trace)
        return output, trace, error

    async def _predict_batch(
        self,
        items: list[Any],
        collect: bool = False,
        first_index: int | list[int] = 0,
        errors: list | None = None,
    ) -> tuple[list, list, int]:
        """Predict ``items`` concurrently; ``first_index`` (the position of the first item in
        its split, or each item's position) is what their traces call ``example_index``.
        ``errors``, when given, is extended with each item's error (None when it succeeded).
        Raises ``Interrupted`` (after cancelling the predictions not done yet) as soon as
        ``interrupt()`` is seen."""
        if isinstance(first_index, int):
            indices = list(range(first_index, first_index + len(items)))
        else:
            indices = list(first_index)
        self._check_interrupted()
        tasks = [
            asyncio.ensure_future(self._predict_one(item, collect, index))
            for item, index in zip(items, indices, strict=True)
        ]
        try:
            pending = set(tasks)
            while pending:
                _, pending = await asyncio.wait(
                    pending, timeout=STOP_CHECK_SECONDS, return_when=asyncio.FIRST_EXCEPTION
                )
                if _first_error(tasks) is not None:
                    break
                self._check_interrupted()
        finally:
            unfinished = [task for task in tasks if not task.done()]
            for task in unfinished:
                task.cancel()
            if unfinished:
                await asyncio.gather(*unfinished, return_exceptions=True)
        error = _first_error(tasks)
        if error is not None:  # unreachable / misconfigured LM: stop, like every call would
            raise error
        outputs, traces, failures = [], [], 0
        for task in tasks:
            output, trace, error = task.result()
            outputs.append(output)
            traces.append(trace)
            failures += error is not None
            if errors is not None:
                errors.append(error)
        self.predictions += len(outputs)
        self.failed_predictions += failures
        return outputs, traces, failures

    async def predict(
        self, x: Any, batch_size: int = 32, callbacks: list | None = None, verbose: int = 0
    ) -> np.ndarray:
        """Run the program on every input, ``batch_size`` predictions at a time, concurrently.

        A prediction that fails (LM error after retries, output that never parses) becomes
        ``None`` and is counted in ``program.last_failures``; an unreachable LM or a
        configuration error stops with that error.

        Args:
            x: numpy object array (or list) of input DataModels.
            batch_size: predictions run concurrently.
            callbacks: :class:`~training.engine.callbacks.Callback` objects
                (``on_predict_begin`` / ``on_predict_end``).
            verbose: 1 adds a progress bar.

        Returns:
            A numpy object array of output DataModels (``None`` where a prediction failed);
            after ``interrupt()``, only those of the batches that completed.

        Example:

        ```python
        y_pred = await program.predict(x_test, batch_size=8)
        ```
        """
        self.budget_exhausted = None
        items = self.prepare_inputs(x, "x")
        callback_list = self._callback_list(callbacks, verbose)
        await callback_list.on_predict_begin()
        outputs: list[Any] = []
        failures = 0
        try:
            for start in range(0, len(items), self._check_batch_size(batch_size)):
                batch_out, _, batch_failures = await self._predict_batch(
                    items[start : start + batch_size], first_index=start
                )
                outputs.extend(batch_out)
                failures += batch_failures
        except Interrupted:
            pass  # interrupt(): the outputs of the completed batches
        except BudgetExhausted as exc:  # a cap: the outputs of the completed batches too
            self._budget_stop(exc)
        self.last_failures = failures
        await callback_list.on_predict_end({"failures": failures})
        return as_object_array(outputs, "predictions")

    @staticmethod
    def _check_batch_size(batch_size: int) -> int:
        return bounds.BATCH_SIZE.check("batch_size", batch_size)


def _first_error(tasks: list[asyncio.Future]) -> BaseException | None:
    """The exception of the first finished, not cancelled task that raised one (every
    finished task's exception is read, so none is logged as "never retrieved")."""
    errors = [task.exception() for task in tasks if task.done() and not task.cancelled()]
    return next((error for error in errors if error is not None), None)
