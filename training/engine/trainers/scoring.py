"""Scoring a program: the rewards and metrics of a batch, ``evaluate``, and the scorer the
optimizer scores candidates with. :class:`Scoring` is the part of the
:class:`~training.engine.trainers.trainer.Trainer` mixin that ``fit`` and ``evaluate`` share.

- Rewards and metrics see a whole batch at once (``reward.score_batch``, batched
  ``metric.update_state``), so e.g. CosineSimilarity embeds a batch in one call.
- Judge rewards (LMAsJudge, ProgramAsJudge) count judgements that gave no usable score in
  ``reward.failed_judgements``; each new one is recorded into usage
  (:class:`~training.engine.rewards.judge_failures.JudgeFailureRecorder`), so
  ``usage.judge_failures`` (and ``history.usage["judge_failures"]``) tells a run how many of
  its zero rewards were judge failures.
- A candidate is scored with the program's variables set to its values for the scoring task
  only, on the validation set (the training set without one), each example's reward and
  prediction kept (:mod:`~training.engine.trainers.candidate_scores`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

from training.engine.callbacks import Callback, CallbackList
from training.engine.language_models import tracing
from training.engine.language_models import usage as usage_mod
from training.engine.language_models.budget import BudgetExhausted
from training.engine.metrics.metric import Metric
from training.engine.modules import example_retrieval as retrieval
from training.engine.optimizers.selection import mean as _mean
from training.engine.saving import serialize
from training.engine.saving.registry import UnknownObjectError
from training.engine.trainers import candidate_scores
from training.engine.trainers.predicting import Interrupted, Predicting
from training.engine.variables import assigned


class Scoring(Predicting):
    """Mixin scoring the program's predictions; ``Trainer`` trains with it, ``Program``
    provides the forward pass, the variables and the data checks."""

    # -- rewards and metrics ---------------------------------------------------------------
    async def _rewards(
        self, y_true: list, y_pred: list, first_index: int | list[int] = 0
    ) -> list[float]:
        """One reward per sample: the whole batch in one ``score_batch`` call when the reward
        has it (a Reward does), else one concurrent call per sample (a plain async function).
        LM calls a reward makes are traced with the role ``judge`` (embeddings: ``embedding``)
        and, when it judges one example at a time, that example's index (``first_index``:
        the position of the first sample in its split, or each sample's position)."""
        if len(y_true) != len(y_pred):
            raise ValueError(f"{len(y_true)} targets but {len(y_pred)} predictions")
        self._judge_failures.start(self.reward)
        if not tracing.active():
            return await self._scored(y_true, y_pred)
        if isinstance(first_index, int):
            indices = list(range(first_index, first_index + len(y_true)))
        else:
            indices = list(first_index)
        with tracing.trace_context(role="judge"), tracing.batch_examples(indices):
            return await self._scored(y_true, y_pred)

    async def _scored(self, y_true: list, y_pred: list) -> list[float]:
        try:
            score_batch = getattr(self.reward, "score_batch", None)
            if callable(score_batch):
                values = list(await score_batch(list(y_true), list(y_pred)))
                if len(values) != len(y_pred):
                    raise ValueError(
                        f"reward {getattr(self.reward, 'name', self.reward)!r}: score_batch "
                        f"returned {len(values)} scores for {len(y_pred)} predictions"
                    )
            else:
                values = await asyncio.gather(
                    *(self.reward(t, p) for t, p in zip(y_true, y_pred, strict=True))
                )
        finally:
            self._judge_failures.record(self.reward)
        scores = []
        for value in values:
            value = float(value)
            scores.append(0.0 if math.isnan(value) else value)
        return scores

    async def _update_metrics(self, y_true: list, y_pred: list) -> None:
        """Metrics built on :class:`Metric` take the batch in one ``update_state`` call; a
        metric that overrides ``update_state`` gets one call per sample, as before."""
        for metric in self.metrics:
            if isinstance(metric, Metric) and type(metric).update_state is Metric.update_state:
                await metric.update_state(list(y_true), list(y_pred))
                continue
            for truth, pred in zip(y_true, y_pred, strict=True):
                await metric.update_state(truth, pred)

    def _metric_logs(self, prefix: str = "") -> dict[str, float]:
        return {f"{prefix}{metric.name}": float(metric.result()) for metric in self.metrics}

    def _reset_metrics(self) -> None:
        for metric in self.metrics:
            metric.reset_state()

    def _require_compiled(self, what: str) -> None:
        if not self.compiled or self.reward is None:
            raise RuntimeError(
                f"{what}(): program {self.name!r} is not compiled with a reward; call "
                "program.compile(reward=..., optimizer=..., metrics=[...]) first"
            )

    # -- evaluate --------------------------------------------------------------------------
    async def _run_evaluation(
        self,
        items: list,
        targets: list,
        batch_size: int,
        callback_list: CallbackList | None,
        prefix: str = "",
        partial: bool = False,
    ) -> dict[str, float]:
        """Score ``items`` batch by batch. After ``interrupt()`` it returns the logs of the
        completed batches when ``partial`` (``evaluate``), else lets ``Interrupted`` through
        (``fit``'s validation: the epoch is abandoned)."""
        self._reset_metrics()
        rewards: list[float] = []
        failures = 0
        batches = max(1, math.ceil(len(items) / batch_size))
        self.last_failures = 0
        for batch, start in enumerate(range(0, len(items), batch_size)):
            batch_errors: list[str | None] = []
            truths = targets[start : start + batch_size]
            try:
                outputs, _, batch_failures = await self._predict_batch(
                    items[start : start + batch_size], first_index=start, errors=batch_errors
                )
                batch_rewards = await self._rewards(truths, outputs, start)
            except Interrupted:
                if not partial:
                    raise
                break
            except BudgetExhausted as exc:  # a cap: the batches scored so far, like interrupt()
                if not partial:
                    raise
                self._budget_stop(exc)
                break
            rewards.extend(batch_rewards)
            await self._update_metrics(truths, outputs)
            failures += batch_failures
            self.last_failures = failures
            if callback_list is not None:
                # example_*: this batch's per-example rewards, outputs (DataModels, None when
                # failed) and errors (None when it succeeded), for callbacks.ExampleRewards.
                await callback_list.on_test_batch_end(
                    batch,
                    {
                        "reward": _mean(rewards),
                        "batches": batches,
                        "example_rewards": batch_rewards,
                        "example_predictions": outputs,
                        "example_errors": batch_errors,
                    },
                )
        logs = {f"{prefix}reward": _mean(rewards)}
        logs.update(self._metric_logs(prefix))
        return logs

    async def evaluate(
        self,
        x: Any,
        y: Any,
        batch_size: int = 32,
        callbacks: list | None = None,
        verbose: int = 0,
        return_dict: bool = True,
    ) -> dict[str, float]:
        """Score the program on (x, y) with the compiled reward and metrics.

        Args:
            x: numpy object array (or list) of input DataModels.
            y: numpy object array (or list) of target DataModels.
            batch_size: predictions run (and scored) together.
            callbacks: :class:`~training.engine.callbacks.Callback` objects
                (``on_test_begin`` / ``on_test_batch_end`` / ``on_test_end``).
            verbose: 1 adds a progress bar.
            return_dict: kept for Keras compatibility; the result is always a dict.

        Returns:
            ``{"reward": mean reward, "<metric>": value, ...}`` (after ``interrupt()``: over
            the batches that completed).

        Example:

        ```python
        metrics = await program.evaluate(x=x_test, y=y_test, batch_size=8)
        print(metrics["reward"])
        ```
        """
        self._require_compiled("evaluate")
        self.budget_exhausted = None
        items = self.prepare_inputs(x, "x")
        targets = self.prepare_targets(y, len(items))
        callback_list = self._callback_list(callbacks, verbose)
        callback_list.set_rows(items, targets)
        await callback_list.on_test_begin()
        logs = await self._run_evaluation(
            items, targets, self._check_batch_size(batch_size), callback_list, partial=True
        )
        await callback_list.on_test_end(logs)
        return logs

    # -- callbacks -------------------------------------------------------------------------
    def _callback_list(self, callbacks: list | None, verbose: int = 0) -> CallbackList:
        if isinstance(callbacks, Callback) and not isinstance(callbacks, CallbackList):
            callbacks = [callbacks]
        if isinstance(callbacks, CallbackList):
            callback_list = callbacks
        else:
            callback_list = CallbackList(list(callbacks or []))
        if verbose:
            from training.engine.callbacks import ProgressBar

            if not any(isinstance(c, ProgressBar) for c in callback_list.callbacks):
                callback_list.append(ProgressBar())
        callback_list.set_program(self)
        return callback_list

    # -- the optimizer's scorer --------------------------------------------------------------
    def _candidate_scorer(
        self, score_items: list, score_targets: list, batch_size: int, split: str | None = None
    ) -> Callable[[dict[str, dict]], Awaitable[float]]:
        """The optimizer's scorer: the mean reward of the program with some variables set to
        candidate values, on the validation set (the training set without one; the selection
        set when ``split`` is ``"selection"``).

        ``scorer.score_examples(values)`` gives the same scoring as a
        :class:`~training.engine.trainers.candidate_scores.CandidateScore` (each example's
        reward, the prediction calls' prompt tokens and latency); ``Optimizer.score`` uses it
        when present, so a custom scorer that only returns a float still works.

        A scored row never retrieves its own example from a retrieval pool
        (``leaving_out_own_rows``), whichever optimizer scores: without a validation split the
        rows scored are the training rows a pool holds, and each would find its own answer.
        """
        if split is None:
            split = "validation" if self.history.params.get("validation_samples") else "train"

        async def score_examples(values: dict[str, dict]) -> candidate_scores.CandidateScore:
            # The values hold for this task only (``variables.assigned``): the optimizer can
            # score a candidate while fit goes on predicting the next batch with its own.
            with (
                assigned(self.variables, values),
                retrieval.leaving_out_own_rows(),
                usage_mod.track() as scoring_usage,
            ):
                rewards: list[float] = []
                predictions: list[dict | None] = []
                for start in range(0, len(score_items), batch_size):
                    with tracing.trace_context(split=split):
                        outputs, _, _ = await self._predict_batch(
                            score_items[start : start + batch_size], first_index=start
                        )
                        rewards.extend(
                            await self._rewards(
                                score_targets[start : start + batch_size], outputs, start
                            )
                        )
                    if len(predictions) < candidate_scores.MAX_EXAMPLE_PREDICTIONS:
                        predictions.extend(_output_json(output) for output in outputs)
            return candidate_scores.from_usage(rewards, scoring_usage.to_dict(), split, predictions)

        async def scorer(values: dict[str, dict]) -> float:
            return (await score_examples(values)).reward

        scorer.score_examples = score_examples
        scorer.examples = len(score_items)  # the optimizer's tie margin: one example's worth
        scorer.split = split
        # What its rewards depend on besides the values: a resumed fit reuses saved rewards
        # only under the same key (``candidate_scores.scoring_set_key``).
        scorer.scoring_set_key = candidate_scores.scoring_set_key(
            score_items, score_targets, split, self._reward_config()
        )
        return scorer

    def _reward_config(self) -> Any:
        """The reward's saved config (what a scoring set's key includes); its qualified name
        when it is not serializable (a plain async function, say)."""
        try:
            return serialize(self.reward)
        except (UnknownObjectError, TypeError, ValueError):
            named = self.reward if hasattr(self.reward, "__qualname__") else type(self.reward)
            return f"{named.__module__}.{named.__qualname__}"

    # -- metric states (what a paused fit keeps) ---------------------------------------------
    def _metric_states(self) -> list[list[float]]:
        """Each metric's running state ([] for a metric without ``get_state``)."""
        return [
            list(metric.get_state()) if hasattr(metric, "get_state") else []
            for metric in self.metrics
        ]

    def _set_metric_states(self, states: list[list[float]]) -> None:
        for metric, state in zip(self.metrics, states, strict=False):
            if state and hasattr(metric, "set_state"):
                metric.set_state(state)

    # -- data checks (implemented by Program) ----------------------------------------------
    def prepare_inputs(self, x: Any, name: str) -> list:  # pragma: no cover
        raise NotImplementedError

    def prepare_targets(self, y: Any, count: int, name: str = "y") -> list:  # pragma: no cover
        raise NotImplementedError


def _output_json(output: Any) -> dict | None:
    """A prediction's output as JSON (None for a failed one), as a candidate event keeps it."""
    if output is None:
        return None
    if hasattr(output, "get_json"):
        return output.get_json()
    return output if isinstance(output, dict) else {"value": output}
