"""Storing what an attempt produces: engine events, evaluations and the final results.

``PersistenceCallback`` writes, for each event ``fit`` emits, the rows the run page is
rendered from (epoch logs, candidates, progress, usage, the per-epoch checkpoint used by
Resume), then emits the stored run and the event's type (``events.stored``:
``training.insight.live`` alone renders and sends the sections that event changed). It also
reads the cancel and pause flags after every batch and sets ``program.stop_training`` /
``program.pause_requested``, which the engine checks after each batch (a pause saves the
checkpoint where fit paused: ``_on_paused``). ``store_evaluation`` and ``results`` store and
return the evaluations and the final figures of an attempt.

An attempt can be superseded while its worker still runs (the reaper failed it, the user
resumed it): then every write below changes nothing, because each one first touches the run
row filtered on this attempt and RUNNING (in the same transaction as the rows it writes),
and the callback stops training after the batch. ``superseded`` is shared with the
heartbeat thread, which notices the same thing between batches.

Database work runs through ``sync_to_async`` (the ORM is synchronous); the send is awaited
right after, so an epoch's row reaches open pages as soon as it is stored.
"""

from __future__ import annotations

import numbers
import threading
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from django.utils import timezone

from training.engine.callbacks import Callback
from training.engine.trainers.candidate_scores import MAX_EXAMPLE_REWARDS
from training.engine.utils.projection import MAX_EMBEDDING_DIMS, compact_embedding
from training.execution import events, hand_candidates, refusals, summaries
from training.execution.recording import (
    candidate_predictions,
    epoch_line,
    evaluation_examples,
)
from training.execution.usage import merged_usage
from training.models import (
    Candidate,
    EpochLog,
    Evaluation,
    OptimizerError,
    Run,
    RunCheckpoint,
)

_UNREAD = object()

#: The events whose store writes the run's usage (and so the traces made until then).
USAGE_EVENTS = ("batch_end", "epoch_end")


class PersistenceCallback(Callback):
    """Stores each engine event of one attempt, then has ``live`` stream the changed parts.

    Args:
        run_id: the run being executed.
        attempt: the attempt this worker executes (writes for another attempt are refused).
        group: the run's Channels group (``run.group_name``).
        tracker: the ``synalinks.usage.track()`` totals of this attempt.
        base_usage: the usage stored by earlier attempts (a resumed run keeps counting).
        superseded: set when the run is no longer this attempt's (shared with the heartbeat).

    Example:
        >>> with synalinks.usage.track() as tracker:
        ...     callback = PersistenceCallback(run.pk, run.attempt, run.group_name, tracker, {})
        ...     await program.fit(x, y, callbacks=[callback])
    """

    def __init__(
        self,
        run_id: int,
        attempt: int,
        group: str,
        tracker: Any,
        base_usage: dict,
        superseded: threading.Event | None = None,
    ):
        super().__init__()
        self.run_id = run_id
        self.attempt = attempt
        self.group = group
        self.tracker = tracker
        self.base_usage = base_usage or {}
        self.cancelled = False
        self.paused = False  # Pause answered: fit paused after a batch, checkpoint saved
        self.hand_queue: list[Any] = []  # queued ``HandCandidate`` rows, for the optimizer
        self.superseded = superseded if superseded is not None else threading.Event()
        # The attempt's trace writer (``traces.TraceWriter``; None: calls are not recorded),
        # and the usage snapshot the current store writes with its traces.
        self._so_far: Any = _UNREAD  # the run's ``epoch_so_far`` as this callback last wrote it
        self.traces: Any = None
        self._snapshot: dict[str, Any] | None = None

    # -- helpers ---------------------------------------------------------------------------
    def usage_fields(self) -> dict[str, Any]:
        """The run's usage columns: this attempt's totals over the earlier attempts' (while a
        store is under way, the snapshot its traces were written with)."""
        if self._snapshot is not None:
            return {**self._snapshot, "usage": dict(self._snapshot["usage"])}
        usage = merged_usage(self.base_usage, self.tracker.to_dict())
        fields = {
            "usage": usage,
            "lm_calls": usage.get("calls", 0),
            "lm_failures": usage.get("failures", 0),
        }
        if self.program is not None:
            fields["failed_predictions"] = int(self.base_usage.get("failed_predictions", 0)) + int(
                getattr(self.program, "failed_predictions", 0)
            )
            fields["usage"]["failed_predictions"] = fields["failed_predictions"]
        return fields

    def _stop(self) -> None:
        """This attempt is no longer the run's: stop after the batch, write nothing more."""
        self.superseded.set()
        if self.program is not None:
            self.program.stop_training = True

    def _update(self, **fields: Any) -> Run | None:
        """Update this attempt's run row; None (and stop) if the attempt was superseded.

        Called first inside each write's transaction: the UPDATE locks the row, so a resume
        that bumps the attempt cannot slip in between the check and the writes."""
        fields.setdefault("heartbeat_at", timezone.now())
        if self.superseded.is_set() or not Run.objects.filter(
            pk=self.run_id, attempt=self.attempt, status=Run.RUNNING
        ).update(**fields):
            self._stop()
            return None
        return Run.objects.select_related("program").get(pk=self.run_id)

    async def store_traces(self) -> dict[str, Any]:
        """Write the traces that wait with a usage snapshot taken now (on the event loop) and
        return that snapshot: the caller stores the same figures, so the run's LM call count
        and its traced calls agree on every page read."""
        fields = self.usage_fields()
        if self.traces is not None:
            await self.traces.flush(fields)
        return fields

    # -- events ----------------------------------------------------------------------------
    async def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        handler = getattr(self, f"_on_{kind}", None)
        if handler is None:
            return
        if self.superseded.is_set():  # set by the heartbeat thread between batches
            self._stop()
            return
        emitted = time.time()
        try:
            if kind in USAGE_EVENTS and self.traces is not None:
                # The traces waiting, the usage snapshot and the event's own store: one trip
                # to the ORM thread, one transaction (training awaits it at every batch end).
                self._snapshot = self.usage_fields()
                run = await self.traces.flush(self._snapshot, then=lambda: handler(event))
            else:
                if kind in USAGE_EVENTS:
                    self._snapshot = self.usage_fields()
                run = await sync_to_async(handler)(event)
        finally:
            self._snapshot = None
        if self.hand_queue:  # at a batch end, between the optimizer's steps
            entries, self.hand_queue = self.hand_queue, []
            results = hand_candidates.add_to(getattr(self.program, "optimizer", None), entries)
            await sync_to_async(hand_candidates.record)(self.run_id, self.attempt, results)
        if run is not None:
            await events.stored(self.group, run, kind, emitted_at=emitted)

    def note(self, event: dict[str, Any]) -> None:
        """Take a ``batch_end``'s point on the chart without storing the run: the next stored
        batch end writes it (a run from code posts several batches at once)."""
        self._epoch_so_far(event)

    def store(self, event: dict[str, Any]) -> Run | None:
        """Store one event (synchronously) without sending the page's fragments: for a caller
        that stores several and sends once (a run from code posts its events in batches)."""
        handler = getattr(self, f"_on_{event.get('type')}", None)
        return handler(event) if handler is not None else None

    def _on_train_begin(self, event: dict) -> Run | None:
        """Training starts (or goes on from a checkpoint). The ETA's clock starts here and
        counts from the batch this attempt starts at: a paused fit resumed starts inside its
        epoch (``initial_batch``), so its pace is not measured over batches done before.

        There is no ``epoch_begin`` write: ``epoch_end`` already stores the next epoch with
        its batch counter at 0 (and one more write per epoch was training's to wait on)."""
        steps = int(event.get("steps") or 0)
        initial_epoch = int(event.get("initial_epoch") or 0)
        initial_batch = min(int(event.get("initial_batch") or 0), steps)
        return self._update(
            phase="training",
            batches_per_epoch=steps,
            current_epoch=initial_epoch,
            current_batch=initial_batch,
            training_started_at=timezone.now(),  # the ETA's clock (training.insight.timing)
            training_start_batch=initial_epoch * steps + initial_batch,
        )

    def _epoch_so_far(self, event: dict) -> dict[str, Any]:
        """The run's ``epoch_so_far`` with this batch added (``epoch_line``; read from the run
        once per callback: a resumed attempt, or a posted batch of a run from code, goes on
        from what is stored)."""
        if self._so_far is _UNREAD:
            self._so_far = (
                Run.objects.filter(pk=self.run_id).values_list("epoch_so_far", flat=True).first()
            )
        self._so_far = epoch_line.with_batch(self._so_far, event)
        return self._so_far

    def _on_batch_end(self, event: dict) -> Run | None:
        run = self._update(
            current_batch=int(event["batch"]) + 1,
            epoch_so_far=self._epoch_so_far(event),
            **self.usage_fields(),
        )
        if run is not None:
            self.hand_queue = hand_candidates.queued(run)
        if run is not None and run.cancel_requested and self.program is not None:
            self.program.stop_training = True
            self.cancelled = True
        elif run is not None and run.pause_requested and self.program is not None:
            self.program.pause_requested = True  # fit pauses after this batch (``_on_paused``)
        return run

    def _on_epoch_end(self, event: dict) -> Run | None:
        epoch = int(event["epoch"])
        logs = {
            key: value
            for key, value in (event.get("logs") or {}).items()
            if isinstance(value, int | float)
        }
        checkpoint = self.program.get_config() if self.program is not None else None
        self._so_far = None
        with transaction.atomic():
            run = self._update(
                current_epoch=epoch + 1, current_batch=0, epoch_so_far=None, **self.usage_fields()
            )
            if run is None:
                return None
            run.checkpoint, _ = RunCheckpoint.objects.update_or_create(
                run_id=self.run_id,
                defaults={
                    "program": checkpoint,
                    "epoch": epoch,
                    "position": None,
                    "saved_at": timezone.now(),
                },
            )
            EpochLog.objects.update_or_create(
                run_id=self.run_id, epoch=epoch, defaults={"logs": logs}
            )
        if run.pause_requested and self.program is not None:
            self.program.pause_requested = True  # asked during the epoch's end: pause here
        return run

    def _on_paused(self, event: dict) -> Run | None:
        """Fit paused at a batch boundary (Pause): the program's state there and the engine's
        pause point are the checkpoint Resume goes on from; the attempt then ends paused."""
        if self.program is None:
            return None
        program = self.program.get_config()
        with transaction.atomic():
            run = self._update(current_epoch=int(event["epoch"]), current_batch=int(event["batch"]))
            if run is not None:  # the last completed epoch stays as it was
                run.checkpoint, _ = RunCheckpoint.objects.update_or_create(
                    run_id=self.run_id,
                    defaults={
                        "program": program,
                        "position": event.get("point"),
                        "saved_at": timezone.now(),
                    },
                )
        self.paused = run is not None
        return run

    def _on_candidate(self, event: dict) -> Run | None:
        defaults = {
            "parent_ids": list(event.get("parent_ids") or []),
            "operation": str(event.get("operation") or ""),
            "value": event.get("value") or {},
            "reward": event.get("reward"),
            "novelty": event.get("novelty"),
            "status": str(event.get("status") or ""),
            "epoch": int(event.get("epoch") or 0),
        }
        defaults.update(event_fields(event))
        key = {
            "run_id": self.run_id,
            "variable": str(event["variable"]),
            "candidate_id": str(event["candidate_id"]),
        }
        predictions = candidate_predictions.from_event(event)
        with transaction.atomic():
            run = self._update()
            if run is None:
                return None
            if predictions is not None and candidate_predictions.room_for(
                self.run_id, key["candidate_id"]
            ):
                defaults["example_predictions"] = predictions
            try:
                with transaction.atomic():
                    Candidate.objects.update_or_create(**key, defaults=defaults)
            except IntegrityError:  # a concurrent insert of the same candidate: update instead
                Candidate.objects.filter(**key).update(**defaults)
        return run

    def _on_selection(self, event: dict) -> Run | None:
        """The optimizer's epoch-end selection of one variable: how many candidates beat the
        seed (kept per variable, the latest epoch's)."""
        fields = ("epoch", "candidates", "beat_seed", "margin", "seed_reward", "champion_id")
        entry = {key: event.get(key) for key in (*fields, "champion_reward")}
        entry["best_gain"] = _gain(event.get("best_gain"))
        variable = str(event.get("variable") or "")[:200]
        with transaction.atomic():
            current = (
                Run.objects.select_for_update()
                .filter(pk=self.run_id)
                .values_list("selection", flat=True)
                .first()
            )
            selection = dict(current or {})
            selection[variable] = entry
            return self._update(selection=selection)

    def _on_final_selection(self, event: dict) -> Run | None:
        """The choice on the selection split, per variable (``fit(selection_split=...)``)."""
        keys = (
            "top_k",
            "selection_samples",
            "margin",
            "validation_best_id",
            "chosen_id",
            "chosen_reward",
            "chosen_selection_reward",
        )
        entry = {key: event.get(key) for key in keys}
        entry["contenders"] = [str(c)[:50] for c in (event.get("contenders") or [])[:50]]
        variable = str(event.get("variable") or "")[:200]
        with transaction.atomic():
            current = (
                Run.objects.select_for_update()
                .filter(pk=self.run_id)
                .values_list("final_selection", flat=True)
                .first()
            )
            chosen = dict(current or {})
            chosen[variable] = entry
            return self._update(final_selection=chosen)

    def _on_candidate_refused(self, event: dict) -> Run | None:
        """A mutation/crossover the optimizer refused as junk before scoring it: counted by
        rule with its latest texts (``training.execution.refusals``)."""
        with transaction.atomic():
            current = (
                Run.objects.select_for_update()
                .filter(pk=self.run_id)
                .values_list("refusals", flat=True)
                .first()
            )
            return self._update(refusals=refusals.add(current, event))

    def _on_optimizer_error(self, event: dict) -> Run | None:
        """A skipped optimizer step (e.g. an OMEGA mutation whose LM call failed)."""
        with transaction.atomic():
            run = self._update()
            if run is None:
                return None
            OptimizerError.objects.create(
                run_id=self.run_id,
                epoch=int(event.get("epoch") or 0),
                variable=str(event.get("variable") or "")[:200],
                operation=str(event.get("operation") or "")[:20],
                error=str(event.get("error") or "unknown error")[:2000],
            )
        return run


def store_evaluation(
    run_id: int,
    attempt: int,
    phase: str,
    index: int,
    logs: dict,
    failures: int,
    usage: dict,
    example_rewards: list[float],
    predictions: list[dict | None] | None = None,
    errors: list[str | None] | None = None,
    statuses: tuple[str, ...] = (Run.RUNNING,),
) -> Run | None:
    """Store one evaluation (and the phase's mean reward, and each example's prediction:
    ``evaluation_examples.store``); the run re-read, or None when the attempt was
    superseded meanwhile (then nothing is stored). ``statuses``: the run's states that
    take it (a run from code evaluates after its fit ended, too)."""
    metrics = {key: float(value) for key, value in logs.items() if isinstance(value, int | float)}
    with transaction.atomic():
        # Touching the run first (this attempt, still running) locks its row and tells a
        # superseded attempt apart: that one stores nothing (None).
        if not Run.objects.filter(pk=run_id, attempt=attempt, status__in=statuses).update(
            heartbeat_at=timezone.now()
        ):
            return None
        evaluation, _ = Evaluation.objects.update_or_create(
            run_id=run_id,
            phase=phase,
            index=index,
            defaults={
                "metrics": metrics,
                "failures": failures,
                "example_rewards": example_rewards,
            },
        )
        evaluation_examples.store(evaluation, example_rewards, predictions or [], errors or [])
        rewards = list(
            Evaluation.objects.filter(run_id=run_id, phase=phase).values_list(
                "metrics__reward", flat=True
            )
        )
        mean, _ = summaries.mean_std([float(value) for value in rewards if value is not None])
        field = "baseline_reward" if phase == Evaluation.BEFORE else "final_reward"
        Run.objects.filter(pk=run_id, attempt=attempt).update(**{field: mean}, **usage)
    return Run.objects.select_related("program").get(pk=run_id)


def results(run_id: int, program: Any, callback: PersistenceCallback) -> dict[str, Any]:
    """The final fields of an attempt: the trained program, the best reward, the usage."""
    logs = EpochLog.objects.filter(run_id=run_id)
    best = summaries.best_of_history(summaries.history(logs)["series"])
    return {
        "trained_program_json": program.get_config(),
        "best_reward": best,
        **callback.usage_fields(),
    }


def outcome(run_id: int, program: Any) -> str:
    """The run's ``outcome`` once its evaluations after training are stored
    (``summaries.outcome``): whether its program kept its seed, and the test verdict."""
    optimizer = getattr(program, "optimizer", None)
    kept = optimizer.kept_seed if optimizer is not None else True
    return summaries.outcome(Evaluation.objects.filter(run_id=run_id), kept)


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _gain(value: Any) -> dict[str, Any] | None:
    """A selection's ``best_gain`` as stored: its numbers and candidate id, checked."""
    if not isinstance(value, dict):
        return None
    keys = ("difference", "low", "high")
    if not all(_number(value.get(key)) for key in keys) or not _number(value.get("n")):
        return None
    gain = {key: float(value[key]) for key in keys}
    gain["n"] = int(value["n"])
    gain["id"] = str(value.get("id") or "")[:40]
    return gain


def event_fields(event: dict[str, Any]) -> dict[str, Any]:
    """The optional columns of a ``candidate`` event: the map's (competition epoch,
    embedding) and the scoring's (per-example rewards, calls, prompt tokens and latency per
    call, selection reward), only when the event has them (a later event without one, a
    competition's kept/dropped, never erases them)."""
    fields: dict[str, Any] = {}
    rewards = event.get("example_rewards")
    if (
        isinstance(rewards, list)
        and len(rewards) <= MAX_EXAMPLE_REWARDS
        and all(_number(r) and 0.0 <= r <= 1.0 for r in rewards)
    ):
        fields["example_rewards"] = [float(r) for r in rewards]
        for key in ("prompt_tokens_per_call", "latency_per_call"):
            value = event.get(key)
            fields[key] = float(value) if _number(value) and value >= 0 else None
        calls = event.get("scoring_calls")
        fields["scoring_calls"] = int(calls) if _number(calls) and calls >= 0 else None
    selection = event.get("selection_reward")
    if _number(selection) and 0.0 <= selection <= 1.0:
        fields["selection_reward"] = float(selection)
    epoch = event.get("competition_epoch")
    if isinstance(epoch, int) and not isinstance(epoch, bool):
        fields["status_epoch"] = epoch
    vector = event.get("embedding")
    if (
        isinstance(vector, list)
        and 0 < len(vector) <= 4 * MAX_EMBEDDING_DIMS
        and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in vector)
    ):
        fields["embedding"] = compact_embedding(vector)
    return fields
