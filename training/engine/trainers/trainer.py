"""Trainer: compile / fit, mixed into Program (``evaluate``, rewards, metrics and the
optimizer's candidate scorer are in :mod:`training.engine.trainers.scoring`; ``predict`` and
the concurrent batch of predictions in :mod:`training.engine.trainers.predicting`).

- Predictions of a batch run concurrently; one that fails (LM error after retries, output that
  never parses) becomes ``None`` and is counted — it never crashes the batch. The program
  keeps running totals: ``predictions`` (finished), ``failed_predictions``, and
  ``prediction_errors`` (each distinct message, secrets redacted, with its count, in the
  order first seen) — what a caller needs to say "N of M failed, because…". An unreachable LM
  stops everything with an error naming the model and its address.
- During ``fit`` (and the evaluations it runs) predictions are memoised by (variables hash,
  input JSON) when every generator is deterministic (temperature 0): the same variables on the
  same input are never paid twice — re-scoring an unchanged candidate costs no LM call.
- ``program.stop_training = True`` (a callback such as EarlyStopping) stops ``fit`` after the
  batch. ``program.pause_requested = True`` (the dashboard's Pause) pauses it after the
  batch: the optimizer settles (``Optimizer.settle``: OMEGA's step under way finishes, its
  paid call kept), a ``paused`` event carries the :class:`PausePoint` (also
  ``program.paused_at``) and ``fit`` returns without ending training (no champion assigned,
  nothing scored at a train end); ``fit(resume_from=point, ...)`` with the program's saved
  state goes on from that batch, with the same remaining batches, and ends as a fit never
  paused. ``program.interrupt()`` (the dashboard's Cancel, from any thread) stops whatever runs
  now — ``fit``, ``evaluate`` or ``predict``, the evaluations and candidate scoring inside ``fit``
  included — within ``predicting.STOP_CHECK_SECONDS``: no new prediction starts and the pending ones
  (those in flight included) are cancelled; the call returns what had completed.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any

from training.engine.callbacks.training_events import TrainingEvents
from training.engine.language_models import tracing
from training.engine.language_models import usage as usage_mod
from training.engine.language_models.budget import BudgetExhausted
from training.engine.optimizers.selection import mean as _mean
from training.engine.rewards.judge_failures import JudgeFailureRecorder
from training.engine.trainers import output_bounds
from training.engine.trainers.data_adapter import (
    FitData,
    check_fit_arguments,
    prepare_fit_data,
)
from training.engine.trainers.epoch_iterator import EpochIterator
from training.engine.trainers.history import History
from training.engine.trainers.pause_point import EpochPredictions, PausePoint
from training.engine.trainers.predicting import Interrupted
from training.engine.trainers.scoring import Scoring

logger = logging.getLogger(__name__)


class Trainer(Scoring):
    """Mixin holding the training loop; ``Program`` provides the forward pass and variables."""

    def _init_trainer(self) -> None:
        self.reward = None
        self.optimizer = None
        self.metrics: list[Any] = []
        self.compiled = False
        self.stop_training = False
        #: Set (by a callback, any thread's write seen at the next batch end): pause after
        #: the batch under way; ``paused_at`` then says where (None: the fit did not pause).
        self.pause_requested = False
        self.paused_at: PausePoint | None = None
        self.interrupted = False
        #: The :class:`BudgetExhausted` that stopped the last fit/evaluate/predict (None: none).
        self.budget_exhausted: BudgetExhausted | None = None
        self._memo: dict | None = None
        self.predictions = 0
        self.failed_predictions = 0
        self.prediction_errors: dict[str, int] = {}
        self.last_failures = 0
        self._judge_failures = JudgeFailureRecorder()

    # -- compile ---------------------------------------------------------------------------
    def compile(
        self, reward: Any = None, optimizer: Any = None, metrics: list | None = None, **_: Any
    ) -> None:
        """Set what training maximises, how, and what else to report.

        Args:
            reward: a :class:`~training.engine.rewards.Reward` (or an async
                ``(y_true, y_pred) -> float``); ``evaluate`` and ``fit`` need one.
            optimizer: an :class:`~training.engine.optimizers.Optimizer`; ``None`` (or the
                guide's ``...`` placeholder) means ``RandomFewShot()``.
            metrics: :class:`~training.engine.metrics.Metric` objects reported beside the reward.

        Returns:
            None; the program is compiled in place (``program.compiled``).

        Example:

        ```python
        program.compile(
            reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
            optimizer=synalinks.optimizers.RandomFewShot(),
            metrics=[synalinks.metrics.F1Score(in_mask=["answer"])],
        )
        ```
        """
        if reward is Ellipsis:
            reward = None
        if reward is not None and not callable(reward):
            raise TypeError(
                f"compile(reward=...) must be a Reward (async callable), got {reward!r}"
            )
        if metrics is not None and not isinstance(metrics, list | tuple):
            raise TypeError("compile(metrics=...) must be a list of Metric objects")
        self.reward = reward
        if optimizer is Ellipsis:  # the guide's `optimizer=...` placeholder: use the default
            optimizer = None
        if optimizer is None:
            from training.engine.optimizers import RandomFewShot

            optimizer = RandomFewShot()
        self.optimizer = optimizer
        self.metrics = list(metrics or [])
        self.compiled = True

    # -- fit -------------------------------------------------------------------------------
    def _deterministic(self) -> bool:
        modules = [m for m in self.modules if hasattr(m, "deterministic")]
        return all(m.deterministic for m in modules)

    async def fit(
        self,
        x: Any = None,
        y: Any = None,
        validation_split: float = 0.0,
        validation_data: tuple | None = None,
        epochs: int = 1,
        batch_size: int = 32,
        shuffle: bool = True,
        callbacks: list | None = None,
        initial_epoch: int = 0,
        seed: int | None = None,
        verbose: int = 0,
        bound_outputs: bool = True,
        selection_split: float = 0.0,
        resume_from: dict | PausePoint | None = None,
    ) -> History:
        """Train the program's variables (instructions, few-shot examples) with its optimizer.

        Three steps, as in Keras: the data are checked and the validation set is set apart
        (:func:`~training.engine.trainers.data_adapter.prepare_fit_data`); the epoch loop
        (:meth:`_train_epochs`) runs :meth:`train_step` on each batch of an
        :class:`~training.engine.trainers.epoch_iterator.EpochIterator`; every moment reaches the
        callbacks through :class:`~training.engine.callbacks.training_events.TrainingEvents`.

        Args:
            x: numpy object array (or list) of input DataModels; a list of arrays for a
                program with several inputs.
            y: numpy object array (or list) of target DataModels.
            validation_split: fraction of (x, y), taken from the end, kept for validation.
            validation_data: ``(x_val, y_val)``; takes precedence over ``validation_split``.
            epochs: the epoch to stop at (epochs ``initial_epoch`` … ``epochs - 1`` run).
            batch_size: examples per batch (the optimizer sees one batch at a time).
            shuffle: shuffle the training examples each epoch (reproducibly, from ``seed``).
            callbacks: :class:`~training.engine.callbacks.Callback` objects.
            initial_epoch: the epoch to resume at (0: a fresh fit, candidates are cleared).
            seed: the seed of shuffles and optimizer sampling (random when None).
            verbose: 1 adds a progress bar.
            bound_outputs: hold each string output the targets fill to twice the longest
                target (at least 32 characters) while fit predicts
                (:mod:`~training.engine.trainers.output_bounds`): exact-match rewards are unchanged
                and rambling candidates cost a fraction of the time. False for a reward that
                values long answers (an LM judge of explanations, say).
            selection_split: (an extension of the guide) the fraction of (x, y), taken from
                the end before the validation split, held out from training and validation.
                After the last epoch the top validation candidates
                (``final_selection.TOP_K``) are scored on it and the best there is the final
                program (the starting value unless one beats it by one selection example);
                0 chooses on validation alone.
            resume_from: (an extension of the guide) where a paused fit stopped
                (``program.paused_at``, or its ``to_json()``): the fit starts at that batch of
                that epoch (``initial_epoch`` is the point's), with the epoch's rewards and
                metric states so far (its predictions so far: ``point.predictions``); the program must hold the state saved then
                (``get_config``) and the same data and seed must be given.

        Returns:
            A :class:`History`: ``history.history`` has one value per epoch for ``reward``,
            each metric and their ``val_`` forms; ``history.usage`` the LM usage of the fit.

        Example:

        ```python
        program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]))
        history = await program.fit(x=x_train, y=y_train, epochs=2, batch_size=8)
        print(history.history["reward"])
        ```
        """
        self._require_compiled("fit")
        batch_size = self._check_batch_size(batch_size)
        point = None
        if resume_from is not None:
            point = (
                resume_from
                if isinstance(resume_from, PausePoint)
                else PausePoint.from_json(resume_from)
            )
            if initial_epoch not in (0, point.epoch):
                raise ValueError(
                    f"fit(resume_from=...) resumes epoch {point.epoch}; initial_epoch was "
                    f"{initial_epoch}"
                )
            initial_epoch = point.epoch
        check_fit_arguments(validation_split, epochs, initial_epoch, selection_split)
        data = prepare_fit_data(self, x, y, validation_split, validation_data, selection_split)
        if seed is None:
            seed = secrets.randbelow(2**31)
        iterator = EpochIterator(data.x, data.y, batch_size=batch_size, shuffle=shuffle, seed=seed)

        callback_list = self._callback_list(callbacks, verbose)
        history = History()
        history.params = {
            "epochs": epochs,
            "steps": iterator.steps,
            "batch_size": batch_size,
            "samples": len(data.x),
            "validation_samples": len(data.val_x),
            "selection_samples": len(data.sel_x),
            "seed": seed,
            "shuffle": shuffle,
            "initial_epoch": initial_epoch,
            # each string output's length limit while fit predicts (``output_bounds``)
            "output_bounds": (
                output_bounds.from_targets([*data.y, *data.val_y]) if bound_outputs else {}
            ),
        }
        callback_list.set_params(history.params)
        callback_list.set_rows(
            [*data.x, *data.val_x, *data.sel_x], [*data.y, *data.val_y, *data.sel_y]
        )
        self.history = history
        self.stop_training = False
        self.pause_requested = False
        self.paused_at = None
        self.budget_exhausted = None
        scorer = self._candidate_scorer(*data.scoring_set, batch_size)
        if initial_epoch == 0 and point is None:
            # A fresh fit scores afresh: its program's models may not be the saved rewards'.
            self.optimizer.forget_saved_scores()
        self.optimizer.attach(self, callback_list, scorer, seed=seed)
        self.optimizer.attach_selection(
            self._candidate_scorer(data.sel_x, data.sel_y, batch_size, split="selection")
            if data.sel_x
            else None
        )
        previous_memo = self._memo
        if self._deterministic() and self._memo is None:
            self._memo = {}
        try:
            with (
                usage_mod.track() as fit_usage,
                output_bounds.bounding(self.modules, history.params["output_bounds"]),
            ):
                await self._train_epochs(
                    iterator,
                    data,
                    TrainingEvents(callback_list),
                    history,
                    epochs,
                    initial_epoch,
                    point,
                )
        finally:
            self._memo = previous_memo
        history.usage = fit_usage.to_dict()
        return history

    async def _train_epochs(
        self,
        iterator: EpochIterator,
        data: FitData,
        events: TrainingEvents,
        history: History,
        epochs: int,
        initial_epoch: int,
        point: PausePoint | None = None,
    ) -> None:
        """The epoch loop: epochs ``initial_epoch`` … ``epochs - 1``, until ``stop_training``,
        ``interrupt()`` or a pause (``pause_requested``: the fit returns at a batch boundary
        without ending training). ``point``: a paused fit's, resumed (its epoch is
        ``initial_epoch``)."""
        if initial_epoch == 0 and point is None:  # a fresh fit: other data's candidates go
            for variable in self.trainable_variables:
                variable.candidates = []
        await self.optimizer.on_train_begin(self.trainable_variables)
        first_batch = point.batch if point is not None else 0
        await events.train_begin(
            epochs, initial_epoch, iterator.steps, iterator.seed, initial_batch=first_batch
        )
        logs: dict[str, Any] = {}
        for epoch in range(initial_epoch, epochs):
            try:
                with tracing.trace_context(epoch=epoch):  # every call of the epoch names it
                    logs, completed = await self._train_epoch(
                        epoch, epochs, iterator, data, events, point
                    )
                point = None
            except Interrupted:  # interrupt(): the epoch is abandoned, like a stopped one
                self.stop_training = True
                break
            except BudgetExhausted as exc:  # a cap refused a call: the same clean stop
                self._budget_stop(exc)
                break
            if self.paused_at is not None:  # paused inside the epoch: training goes on later
                return
            if not completed:
                break
            history.append(epoch, logs)
            await events.epoch_end(epoch, logs)
            if self._pausing() and epoch + 1 < epochs:  # asked during the epoch's end
                await self._pause(events, PausePoint(epoch + 1, 0))
                return
            if self.stop_training:
                break
        try:
            await self.optimizer.on_train_end()  # the best candidates so far are assigned
        except Interrupted:
            pass  # an optimizer that scores at the end: interrupted like the rest
        except BudgetExhausted as exc:  # ... or refused by a cap; its best so far is assigned
            self._budget_stop(exc)
        await events.train_end(logs, stopped=bool(self.stop_training))

    async def _train_epoch(
        self,
        epoch: int,
        epochs: int,
        iterator: EpochIterator,
        data: FitData,
        events: TrainingEvents,
        point: PausePoint | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """One epoch: a train step per batch, the optimizer's epoch end, then validation.

        Returns the logs (of the last batch when ``stop_training`` or a pause cut the epoch
        short) and whether the epoch ran to its end. Called inside
        ``trace_context(epoch=epoch)``. ``point``: a paused fit's point in this epoch (the
        batches before it are done).
        """
        # The epoch's predictions are counted from here (those before a pause: the point's).
        start = EpochPredictions.totals(self)
        earlier = point.predictions if point is not None else EpochPredictions()
        await events.epoch_begin(epoch, epochs)
        await self.optimizer.on_epoch_begin(epoch)
        self._reset_metrics()
        rewards: list[float] = []
        logs: dict[str, Any] = {}
        first = 0
        if point is not None:  # a paused fit resumed: its epoch so far, then the next batch
            first, rewards = point.batch, list(point.rewards)
            self._set_metric_states(point.metrics)
        for batch, batch_x, batch_y in iterator.batches(epoch):
            if batch < first:
                continue
            await events.batch_begin(batch)
            with tracing.trace_context(split="train"):
                batch_rewards, failures = await self.train_step(
                    batch, batch_x, batch_y, iterator.batch_indices(epoch, batch)
                )
            rewards.extend(batch_rewards)
            logs = {"reward": _mean(rewards), **self._metric_logs()}
            await events.batch_end(epoch, batch, iterator.steps, logs, failures)
            if self._pausing():
                await self._pause(
                    events,
                    PausePoint(epoch, batch + 1, list(rewards), self._metric_states()),
                    lambda: earlier.plus(EpochPredictions.totals(self).minus(start)),
                )
                return logs, False
            if self.stop_training and batch < iterator.steps - 1:
                return logs, False
        train_logs = {"reward": _mean(rewards), **self._metric_logs()}
        await self.optimizer.on_epoch_end(epoch)
        logs = dict(train_logs)
        if data.val_x:
            with tracing.trace_context(split="validation"):
                logs.update(
                    await self._run_evaluation(
                        data.val_x, data.val_y, iterator.batch_size, None, "val_"
                    )
                )
        return logs, True

    def _pausing(self) -> bool:
        """A pause was asked and nothing stops the fit instead (Cancel, a cap)."""
        return self.pause_requested and not self.stop_training and not self.interrupted

    async def _pause(
        self,
        events: TrainingEvents,
        point: PausePoint,
        predictions: Callable[[], EpochPredictions] | None = None,
    ) -> None:
        """Pause here: the optimizer's work under way finishes (``settle``), then ``paused_at``
        and the ``paused`` event say where the fit goes on from. ``predictions``: inside an
        epoch, its predictions so far, counted once ``settle`` made its own."""
        await self.optimizer.settle()
        if predictions is not None:
            point.predictions = predictions()
        self.paused_at = point
        await events.paused(point.to_json())

    async def train_step(
        self, batch: int, batch_x: list, batch_y: list, indices: list[int] | None = None
    ) -> tuple[list[float], int]:
        """One training step: predict a batch (with traces), score it, update the metrics,
        let the optimizer learn.

        The override point of ``fit``, as Keras's ``Model.train_step``: ``fit`` calls it once
        per batch (inside ``trace_context(split="train")``), between the callbacks'
        ``on_batch_begin`` and ``on_batch_end``. A subclass of ``Program`` that
        trains differently overrides it and returns the same two things; the batch's rewards
        make the epoch's ``reward`` log.

        Args:
            batch: the batch's number within the epoch (from 0).
            batch_x: the batch's inputs, one DataModel (or list of them) per example.
            batch_y: the batch's targets, one DataModel per example.
            indices: the examples' positions in the training set (what LM call traces
                name); None counts them from 0.

        Returns:
            The batch's rewards (one float per example) and how many of its predictions
            failed.

        Example:

        ```python
        class LoggedProgram(synalinks.Program):
            async def train_step(self, batch, batch_x, batch_y, indices=None):
                rewards, failures = await super().train_step(batch, batch_x, batch_y, indices)
                print(f"batch {batch}: mean reward {sum(rewards) / len(rewards):.2f}")
                return rewards, failures
        ```
        """
        optimizer = self.optimizer
        await optimizer.on_batch_begin(batch)
        outputs, traces, failures = await self._predict_batch(
            batch_x, collect=True, first_index=indices if indices is not None else 0
        )
        batch_rewards = await self._rewards(batch_y, outputs, indices if indices is not None else 0)
        await self._update_metrics(batch_y, outputs)
        optimizer.batch_traces = traces
        await optimizer.on_batch_end(batch, batch_x, batch_y, outputs, batch_rewards)
        optimizer.batch_traces = None
        return batch_rewards, failures
