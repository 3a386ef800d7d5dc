"""Trainer: compile / predict / evaluate / fit, mixed into Program.

- Predictions of a batch run concurrently; one that fails (LM error after retries, output that
  never parses) becomes ``None`` and is counted — it never crashes the batch. An unreachable LM
  stops everything with an error naming the model and its address.
- During ``fit`` (and the evaluations it runs) predictions are memoised by (variables hash,
  input JSON) when every generator is deterministic (temperature 0): the same variables on the
  same input are never paid twice — re-scoring an unchanged candidate costs no LM call.
- ``program.stop_training = True`` (a callback, the dashboard's cancel) stops after the batch.
- Rewards and metrics see a whole batch at once (``reward.score_batch``, batched
  ``metric.update_state``), so e.g. CosineSimilarity embeds a batch in one call.
- Judge rewards (LMAsJudge, ProgramAsJudge) count judgements that gave no usable score in
  ``reward.failed_judgements``; the trainer records each new one into usage, so
  ``usage.judge_failures`` (and ``history.usage["judge_failures"]``) tells a run how many of
  its zero rewards were judge failures.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
from typing import Any

import numpy as np

from training.engine import usage as usage_mod
from training.engine.callbacks import Callback, CallbackList
from training.engine.history import History
from training.engine.language_model import LanguageModelConfigError, LanguageModelUnreachable
from training.engine.metrics.metric import Metric
from training.engine.modules.module import TRACE
from training.engine.optimizers.selection import mean as _mean

logger = logging.getLogger(__name__)


def _as_array(data: Any, name: str) -> np.ndarray:
    if data is None:
        raise ValueError(f"{name} is required")
    if isinstance(data, np.ndarray):
        return data
    if isinstance(data, list | tuple):
        array = np.empty(len(data), dtype=object)
        for index, item in enumerate(data):
            array[index] = item
        return array
    raise TypeError(
        f"{name} must be a numpy object array (or a list) of DataModels, got {type(data).__name__}"
    )


class Trainer:
    """Mixin holding the training loop; ``Program`` provides the forward pass and variables."""

    def _init_trainer(self) -> None:
        self.reward = None
        self.optimizer = None
        self.metrics: list[Any] = []
        self.compiled = False
        self.stop_training = False
        self._memo: dict | None = None
        self.failed_predictions = 0
        self.last_failures = 0
        self._judge_reward: Any = None
        self._judge_seen = 0

    # -- compile ---------------------------------------------------------------------------
    def compile(
        self, reward: Any = None, optimizer: Any = None, metrics: list | None = None, **_: Any
    ) -> None:
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

    async def _predict_one(self, item: Any, collect: bool) -> tuple[Any, list[dict], bool]:
        key = None
        if self._memo is not None:
            key = self._memo_key(item)
            hit = self._memo.get(key)
            if hit is not None:
                usage_mod.record(usage_mod.UsageRecord(model="memo", memo_hit=True))
                output, trace = hit
                return output, trace, False
        trace: list[dict] = []
        token = TRACE.set(trace) if (collect or key is not None) else None
        try:
            output = await self.call(item, training=collect)
            failed = output is None
        except (LanguageModelUnreachable, LanguageModelConfigError):
            raise  # every call would fail the same way: stop, don't count each one
        except Exception as exc:  # counted failed prediction, never a crashed batch
            logger.warning("%s: prediction failed: %s", self.name, exc)
            output, failed = None, True
        finally:
            if token is not None:
                TRACE.reset(token)
        if key is not None and not failed:
            # Only successes are memoised: a one-off failure (a 5xx after retries, a parse
            # failure) must be retried by the next scoring, not replayed and counted again.
            self._memo[key] = (output, trace)
        return output, trace, failed

    async def _predict_batch(
        self, items: list[Any], collect: bool = False
    ) -> tuple[list, list, int]:
        results = await asyncio.gather(
            *(self._predict_one(item, collect) for item in items), return_exceptions=True
        )
        outputs, traces, failures = [], [], 0
        for result in results:
            if isinstance(result, BaseException):
                raise result
            output, trace, failed = result
            outputs.append(output)
            traces.append(trace)
            failures += int(failed)
        self.failed_predictions += failures
        return outputs, traces, failures

    async def predict(
        self, x: Any, batch_size: int = 32, callbacks: list | None = None, verbose: int = 0
    ) -> np.ndarray:
        """Numpy object array of output DataModels (``None`` where a prediction failed)."""
        items = self.prepare_inputs(x, "x")
        callback_list = self._callback_list(callbacks, verbose)
        await callback_list.on_predict_begin()
        outputs: list[Any] = []
        failures = 0
        for start in range(0, len(items), self._check_batch_size(batch_size)):
            batch_out, _, batch_failures = await self._predict_batch(
                items[start : start + batch_size]
            )
            outputs.extend(batch_out)
            failures += batch_failures
        self.last_failures = failures
        await callback_list.on_predict_end({"failures": failures})
        return _as_array(outputs, "predictions")

    @staticmethod
    def _check_batch_size(batch_size: int) -> int:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        return batch_size

    # -- rewards and metrics ---------------------------------------------------------------
    async def _rewards(self, y_true: list, y_pred: list) -> list[float]:
        """One reward per sample: the whole batch in one ``score_batch`` call when the reward
        has it (a Reward does), else one concurrent call per sample (a plain async function)."""
        if len(y_true) != len(y_pred):
            raise ValueError(f"{len(y_true)} targets but {len(y_pred)} predictions")
        self._sync_judge_baseline()
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
            self._record_judge_failures()
        scores = []
        for value in values:
            value = float(value)
            scores.append(0.0 if math.isnan(value) else value)
        return scores

    # -- judge failures --------------------------------------------------------------------
    def _judge_failure_count(self) -> int | None:
        count = getattr(self.reward, "failed_judgements", None)
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    def _sync_judge_baseline(self) -> None:
        """Start counting from the reward's current total when the reward is new to us."""
        if self._judge_reward is not self.reward:
            self._judge_reward = self.reward
            self._judge_seen = self._judge_failure_count() or 0

    def _record_judge_failures(self) -> None:
        """Record the judge failures since the last look (no await in here: each is counted
        once even when several evaluations score concurrently)."""
        now = self._judge_failure_count()
        if now is None:
            return
        new, self._judge_seen = now - self._judge_seen, now
        judge = getattr(getattr(self.reward, "language_model", None), "model", None)
        model = judge or str(getattr(self.reward, "name", "judge"))
        for _ in range(max(0, new)):
            usage_mod.record(usage_mod.UsageRecord(model=model, kind="judge", failed=True))

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
    ) -> dict[str, float]:
        self._reset_metrics()
        rewards: list[float] = []
        failures = 0
        batches = max(1, math.ceil(len(items) / batch_size))
        for batch, start in enumerate(range(0, len(items), batch_size)):
            outputs, _, batch_failures = await self._predict_batch(
                items[start : start + batch_size]
            )
            truths = targets[start : start + batch_size]
            rewards.extend(await self._rewards(truths, outputs))
            await self._update_metrics(truths, outputs)
            failures += batch_failures
            if callback_list is not None:
                await callback_list.on_test_batch_end(
                    batch, {"reward": _mean(rewards), "batches": batches}
                )
        self.last_failures = failures
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
        """``{"reward": mean reward, "<metric>": value, ...}`` over (x, y)."""
        self._require_compiled("evaluate")
        items = self.prepare_inputs(x, "x")
        targets = self.prepare_targets(y, len(items))
        callback_list = self._callback_list(callbacks, verbose)
        await callback_list.on_test_begin()
        logs = await self._run_evaluation(
            items, targets, self._check_batch_size(batch_size), callback_list
        )
        await callback_list.on_test_end(logs)
        return logs

    # -- fit -------------------------------------------------------------------------------
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
    ) -> History:
        """Train the program's variables; returns a :class:`History` (also ``history.usage``)."""
        self._require_compiled("fit")
        batch_size = self._check_batch_size(batch_size)
        if not 0.0 <= validation_split < 1.0:
            raise ValueError(f"validation_split must be in [0, 1), got {validation_split}")
        if not isinstance(epochs, int) or epochs < 1 or not 0 <= initial_epoch <= epochs:
            raise ValueError(
                f"need epochs >= 1 and 0 <= initial_epoch <= epochs (got {epochs}, {initial_epoch})"
            )
        items = self.prepare_inputs(x, "x")
        targets = self.prepare_targets(y, len(items))
        if validation_data is not None:
            if not isinstance(validation_data, list | tuple) or len(validation_data) != 2:
                raise ValueError("validation_data must be a tuple (x_val, y_val)")
            val_items = self.prepare_inputs(validation_data[0], "validation_data x")
            val_targets = self.prepare_targets(
                validation_data[1], len(val_items), "validation_data y"
            )
        elif validation_split > 0:
            cut = len(items) - int(round(len(items) * validation_split))
            if cut <= 0 or cut >= len(items):
                raise ValueError(
                    f"validation_split={validation_split} leaves no training or no validation "
                    f"data out of {len(items)} examples"
                )
            val_items, val_targets = items[cut:], targets[cut:]
            items, targets = items[:cut], targets[:cut]
        else:
            val_items, val_targets = [], []
        if not items:
            raise ValueError("fit(): no training data")
        if seed is None:
            seed = secrets.randbelow(2**31)
        steps = math.ceil(len(items) / batch_size)

        callback_list = self._callback_list(callbacks, verbose)
        history = History()
        history.params = {
            "epochs": epochs,
            "steps": steps,
            "batch_size": batch_size,
            "samples": len(items),
            "validation_samples": len(val_items),
            "seed": seed,
            "shuffle": shuffle,
            "initial_epoch": initial_epoch,
        }
        callback_list.set_params(history.params)
        self.history = history
        self.stop_training = False
        score_items, score_targets = (val_items, val_targets) if val_items else (items, targets)

        async def scorer(values: dict[str, dict]) -> float:
            saved = self.get_variables()
            try:
                self.set_variables(values, partial=True)
                rewards: list[float] = []
                for start in range(0, len(score_items), batch_size):
                    outputs, _, _ = await self._predict_batch(
                        score_items[start : start + batch_size]
                    )
                    rewards.extend(
                        await self._rewards(score_targets[start : start + batch_size], outputs)
                    )
                return _mean(rewards)
            finally:
                self.set_variables(saved)

        optimizer = self.optimizer
        optimizer.attach(self, callback_list, scorer, seed=seed)
        previous_memo = self._memo
        if self._deterministic() and self._memo is None:
            self._memo = {}
        logs: dict[str, Any] = {}
        try:
            with usage_mod.track() as fit_usage:
                if initial_epoch == 0:  # a fresh fit: candidates scored on other data don't compete
                    for variable in self.trainable_variables:
                        variable.candidates = []
                await optimizer.on_train_begin(self.trainable_variables)
                await callback_list.on_train_begin()
                await callback_list.on_event(
                    {
                        "type": "train_begin",
                        "epochs": epochs,
                        "initial_epoch": initial_epoch,
                        "steps": steps,
                        "seed": seed,
                    }
                )
                for epoch in range(initial_epoch, epochs):
                    await callback_list.on_event(
                        {"type": "epoch_begin", "epoch": epoch, "epochs": epochs}
                    )
                    await callback_list.on_epoch_begin(epoch)
                    await optimizer.on_epoch_begin(epoch)
                    order = np.arange(len(items))
                    if shuffle:
                        order = np.random.default_rng([seed, epoch]).permutation(len(items))
                    self._reset_metrics()
                    rewards: list[float] = []
                    completed = True
                    for batch in range(steps):
                        index = order[batch * batch_size : (batch + 1) * batch_size]
                        batch_x = [items[i] for i in index]
                        batch_y = [targets[i] for i in index]
                        await callback_list.on_batch_begin(batch)
                        await optimizer.on_batch_begin(batch)
                        outputs, traces, failures = await self._predict_batch(batch_x, collect=True)
                        batch_rewards = await self._rewards(batch_y, outputs)
                        await self._update_metrics(batch_y, outputs)
                        rewards.extend(batch_rewards)
                        optimizer.batch_traces = traces
                        await optimizer.on_batch_end(
                            batch, batch_x, batch_y, outputs, batch_rewards
                        )
                        optimizer.batch_traces = None
                        logs = {"reward": _mean(rewards), **self._metric_logs()}
                        await callback_list.on_batch_end(batch, logs)
                        await callback_list.on_event(
                            {
                                "type": "batch_end",
                                "epoch": epoch,
                                "batch": batch,
                                "batches": steps,
                                "logs": dict(logs),
                                "failures": failures,
                            }
                        )
                        if self.stop_training and batch < steps - 1:
                            completed = False
                            break
                    if not completed:
                        break
                    train_logs = {"reward": _mean(rewards), **self._metric_logs()}
                    await optimizer.on_epoch_end(epoch)
                    logs = dict(train_logs)
                    if val_items:
                        logs.update(
                            await self._run_evaluation(
                                val_items, val_targets, batch_size, None, "val_"
                            )
                        )
                    history.append(epoch, logs)
                    await callback_list.on_epoch_end(epoch, logs)
                    await callback_list.on_event(
                        {"type": "epoch_end", "epoch": epoch, "logs": dict(logs)}
                    )
                    if self.stop_training:
                        break
                await optimizer.on_train_end()
                await callback_list.on_train_end(logs)
                await callback_list.on_event(
                    {"type": "train_end", "logs": dict(logs), "stopped": bool(self.stop_training)}
                )
        finally:
            self._memo = previous_memo
        history.usage = fit_usage.to_dict()
        return history

    # -- data checks (implemented by Program) ----------------------------------------------
    def prepare_inputs(self, x: Any, name: str) -> list:  # pragma: no cover
        raise NotImplementedError

    def prepare_targets(self, y: Any, count: int, name: str = "y") -> list:  # pragma: no cover
        raise NotImplementedError
