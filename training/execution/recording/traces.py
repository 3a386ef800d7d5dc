"""Storing a run's LM call traces: the engine records them, this writes them in bulk.

``recording(run_id, attempt, superseded)`` wraps one attempt of a run (see
``attempt._train_then_close``). Inside it the engine's :func:`training.engine.language_models.tracing.record`
hands every call's bounded, scrubbed :class:`~training.engine.language_models.tracing.CallTrace` to a
:class:`TraceWriter`, which buffers them. They are written with one ``bulk_create`` in the
same transaction as the run's usage totals, from one snapshot taken on the event loop
(``TraceWriter.usage``, the persistence callback's ``usage_fields``): at every batch and
epoch end and evaluation (``PersistenceCallback.store_traces``), every :data:`FLUSH_RECORDS`
records (a bound on what waits in memory) and when the attempt ends. So a page read at any
moment shows as many LM calls traced as the usage counts (a timer of its own would make
the traced count trail the usage mid-run).

The run's cap (``TRAINBOARD_TRACE_MAX_CALLS``) holds over all its attempts: a resumed attempt
records what the earlier ones left of it, and every call past the cap is only counted in
``Run.traces_dropped``. Like the persistence callback, a write first touches the run row
filtered on this attempt and RUNNING, so a superseded attempt stores nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import Max

from training import conf
from training.engine import tracing
from training.models import LMCallTrace, Run

#: A flush (traces and usage together) is started when this many records wait.
FLUSH_RECORDS = 200

logger = logging.getLogger(__name__)


def max_calls() -> int:
    return int(conf.get("TRAINBOARD_TRACE_MAX_CALLS"))


def max_chars() -> int:
    return max(1, int(conf.get("TRAINBOARD_TRACE_MAX_CHARS")))


class TraceWriter:
    """Buffers a run attempt's traces and writes them in bulk (see the module docstring).

    Args:
        run_id: the run.
        attempt: the attempt that records (a superseded one writes nothing).
        superseded: set when the attempt is no longer the run's (shared with the heartbeat).

    ``usage`` (set by the attempt: ``PersistenceCallback.usage_fields``) gives the run's
    usage columns; each flush writes them with its traces, so the two never disagree.
    """

    def __init__(self, run_id: int, attempt: int, superseded: threading.Event | None = None):
        self.run_id = run_id
        self.attempt = attempt
        self.superseded = superseded if superseded is not None else threading.Event()
        self.recorder: tracing.TraceRecorder | None = None
        self.usage: Callable[[], dict[str, Any]] | None = None
        self.pending: list[tracing.CallTrace] = []
        self.base_seq = 0
        self.base_dropped = 0
        self.remaining = 0
        self.written = 0
        self._tasks: set[asyncio.Task] = set()
        self._lock = asyncio.Lock()

    def start(self) -> None:
        """Read what earlier attempts stored (sync: called through ``sync_to_async``)."""
        stored = LMCallTrace.objects.filter(run_id=self.run_id)
        self.base_seq = stored.aggregate(last=Max("seq"))["last"] or 0
        self.remaining = max(0, max_calls() - stored.count())
        self.base_dropped = (
            Run.objects.filter(pk=self.run_id).values_list("traces_dropped", flat=True).first() or 0
        )

    # -- the engine's callback (runs on the event loop) ------------------------------------
    def add(self, trace: tracing.CallTrace) -> None:
        self.pending.append(trace)
        if len(self.pending) >= FLUSH_RECORDS:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # called off the loop: the next flush takes them
                return
            task = loop.create_task(self.flush())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # -- writing ---------------------------------------------------------------------------
    async def flush(
        self, fields: dict[str, Any] | None = None, then: Callable[[], Any] | None = None
    ) -> Any:
        """Write what is waiting with the run's usage columns (``fields``, else a snapshot of
        ``usage`` taken now, with the batch); flushes run one at a time, in order.

        ``then``: a synchronous write done right after, in the same database transaction and
        the same trip to the ORM thread (the persistence callback's store of the event that
        flushed: one commit per batch end, not two); its result is returned and its errors
        raised, where a failed trace write is only logged."""
        async with self._lock:
            # Taken together on the event loop, where calls record both: no call in between.
            batch, self.pending = self.pending, []
            if fields is None:
                fields = self.usage() if self.usage is not None else {}
            dropped = self.recorder.dropped if self.recorder is not None else 0
            if not batch and not dropped and not fields and then is None:
                return None
            return await sync_to_async(self._write_then)(batch, dropped, fields, then)

    def _write_then(
        self,
        batch: list[tracing.CallTrace],
        dropped: int,
        fields: dict[str, Any],
        then: Callable[[], Any] | None,
    ) -> Any:
        with transaction.atomic():
            try:
                self._write(batch, dropped, fields)
            except Exception:  # traces are a view on the run: never the reason it fails
                logger.exception("run %s: %d call traces not stored", self.run_id, len(batch))
            return then() if then is not None else None

    async def close(self) -> None:
        """Wait for started flushes, then write the rest."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.flush()

    def _write(
        self, batch: list[tracing.CallTrace], dropped: int, fields: dict[str, Any] | None = None
    ) -> None:
        if self.superseded.is_set():
            return
        with transaction.atomic():
            if not Run.objects.filter(
                pk=self.run_id, attempt=self.attempt, status=Run.RUNNING
            ).update(traces_dropped=self.base_dropped + dropped, **(fields or {})):
                self.superseded.set()  # the persistence callback stops the fit
                return
            LMCallTrace.objects.bulk_create(
                [trace_row(self.run_id, self.attempt, self.base_seq, trace) for trace in batch],
                batch_size=FLUSH_RECORDS,
            )
        self.written += len(batch)


def trace_row(run_id: int, attempt: int, base_seq: int, trace: tracing.CallTrace) -> LMCallTrace:
    """The row of one recorded call (``base_seq``: the run's last stored ``seq``)."""
    return LMCallTrace(
        run_id=run_id,
        attempt=attempt,
        seq=base_seq + trace.seq,
        role=trace.role[:20],
        kind=trace.kind[:20],
        model=trace.model[:200],
        candidate_id=trace.candidate_id or "",
        example_index=trace.example_index,
        split=trace.split or "",
        phase=trace.phase or "",
        epoch=trace.epoch,
        messages=trace.messages,
        response=trace.response,
        parsed=trace.parsed,
        error=trace.error or "",
        failed=trace.failed,
        latency=float(trace.latency),
        attempts=int(trace.attempts),
        prompt_tokens=int(trace.prompt_tokens or 0),
        completion_tokens=int(trace.completion_tokens or 0),
        cost=trace.cost,
        cache_hit=trace.cache_hit,
        memo_hit=trace.memo_hit,
    )


@contextlib.asynccontextmanager
async def recording(
    run_id: int, attempt: int, superseded: threading.Event | None = None
) -> AsyncIterator[TraceWriter]:
    """Record and store the LM calls made inside the block (one attempt of a run)."""
    writer = TraceWriter(run_id, attempt, superseded)
    await sync_to_async(writer.start)()
    with tracing.record(
        max_calls=writer.remaining, max_chars=max_chars(), on_record=writer.add, keep=False
    ) as recorder:
        writer.recorder = recorder
        try:
            yield writer
        finally:
            await writer.close()


def evaluation_context(phase: str) -> Any:
    """The trace context of test-split predictions (``phase``: before | after, the
    evaluations; samples, the trained program's answers shown on the run page)."""
    return tracing.trace_context(split="test", phase=phase)
