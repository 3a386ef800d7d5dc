"""The callback that makes a run observable: it persists every engine event and streams it.

For each event ``fit`` emits it writes the rows the run page is rendered from (epoch logs,
candidates, progress, usage, the per-epoch checkpoint used by Resume), renders the changed
fragments and sends them to the run's Channels group. It also reads the cancel flag after
every batch and sets ``program.stop_training``, which the engine checks after each batch.

An attempt can be superseded while its worker still runs (the reaper failed it, the user
resumed it): then every write below changes nothing, because each one first touches the run
row filtered on this attempt and RUNNING (in the same transaction as the rows it writes),
and the callback stops training after the batch. ``superseded`` is shared with the
heartbeat thread, which notices the same thing between batches.

Database work runs through ``sync_to_async`` (the ORM is synchronous); the group send is
awaited directly, so an epoch's row reaches open pages as soon as it is stored.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from django.utils import timezone

from training.engine.callbacks import Callback
from training.models import Candidate, EpochLog, OptimizerError, Run
from training.services import live
from training.services.usage import merged_usage

PROGRESS_PARTS = ("progress", "usage")


class PersistenceCallback(Callback):
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
        self.superseded = superseded if superseded is not None else threading.Event()

    # -- helpers ---------------------------------------------------------------------------
    def usage_fields(self) -> dict[str, Any]:
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

    async def _push(self, html: str) -> None:
        await live.send(self.group, html)

    # -- events ----------------------------------------------------------------------------
    async def on_event(self, event: dict[str, Any]) -> None:
        handler = getattr(self, f"_on_{event.get('type')}", None)
        if handler is None:
            return
        if self.superseded.is_set():  # set by the heartbeat thread between batches
            self._stop()
            return
        html = await sync_to_async(handler)(event)
        if html:
            await self._push(html)

    def _on_train_begin(self, event: dict) -> str:
        run = self._update(
            phase="training",
            batches_per_epoch=int(event.get("steps") or 0),
            current_epoch=int(event.get("initial_epoch") or 0),
            current_batch=0,
        )
        return live.render_parts(run, ("status", "progress")) if run else ""

    def _on_epoch_begin(self, event: dict) -> str:
        run = self._update(current_epoch=int(event["epoch"]), current_batch=0)
        return live.render_parts(run, ("progress",)) if run else ""

    def _on_batch_end(self, event: dict) -> str:
        run = self._update(current_batch=int(event["batch"]) + 1, **self.usage_fields())
        if run is None:
            return ""
        if run.cancel_requested and self.program is not None:
            self.program.stop_training = True
            self.cancelled = True
        return live.render_parts(run, PROGRESS_PARTS)

    def _on_epoch_end(self, event: dict) -> str:
        emitted = time.time()
        epoch = int(event["epoch"])
        logs = {
            key: value
            for key, value in (event.get("logs") or {}).items()
            if isinstance(value, int | float)
        }
        checkpoint = self.program.get_config() if self.program is not None else None
        with transaction.atomic():
            run = self._update(
                current_epoch=epoch + 1,
                current_batch=0,
                checkpoint_json=checkpoint,
                checkpoint_epoch=epoch,
                **self.usage_fields(),
            )
            if run is None:
                return ""
            EpochLog.objects.update_or_create(
                run_id=self.run_id, epoch=epoch, defaults={"logs": logs}
            )
        return live.render_parts(
            run, ("progress", "usage", "epochs", "chart", "leaderboard"), emitted_at=emitted
        )

    def _on_candidate(self, event: dict) -> str:
        defaults = {
            "parent_ids": list(event.get("parent_ids") or []),
            "operation": str(event.get("operation") or ""),
            "value": event.get("value") or {},
            "reward": event.get("reward"),
            "novelty": event.get("novelty"),
            "status": str(event.get("status") or ""),
            "epoch": int(event.get("epoch") or 0),
        }
        key = {
            "run_id": self.run_id,
            "variable": str(event["variable"]),
            "candidate_id": str(event["candidate_id"]),
        }
        with transaction.atomic():
            run = self._update()
            if run is None:
                return ""
            try:
                with transaction.atomic():
                    Candidate.objects.update_or_create(**key, defaults=defaults)
            except IntegrityError:  # a concurrent insert of the same candidate: update instead
                Candidate.objects.filter(**key).update(**defaults)
        return live.render_parts(run, ("leaderboard",))

    def _on_optimizer_error(self, event: dict) -> str:
        """A skipped optimizer step (e.g. an OMEGA mutation whose LM call failed)."""
        with transaction.atomic():
            run = self._update()
            if run is None:
                return ""
            OptimizerError.objects.create(
                run_id=self.run_id,
                epoch=int(event.get("epoch") or 0),
                variable=str(event.get("variable") or "")[:200],
                operation=str(event.get("operation") or "")[:20],
                error=str(event.get("error") or "unknown error")[:2000],
            )
        return live.render_parts(run, ("leaderboard",))
