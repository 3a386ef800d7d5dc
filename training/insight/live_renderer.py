"""The worker's live renderer: the fragments a stored change touched, rendered and sent on a
thread of their own, so the training loop never waits on a template or a socket.

Why: rendering every event's fragments (epoch table, chart, leaderboard, lineage, map,
spend, forecast) costs ~170 ms an epoch on a loaded machine; awaited inside ``fit``, with
the send, it nearly doubles a 60-epoch run of ``bench/stream_latency.py`` and delays what a
page sees by seconds. So ``submit`` only notes which fragments
of which run are due and returns; daemon threads of the process render them from the latest
stored run, each fragment once per change whatever the number of pages watching (one group
send reaches them all), and changes that come while it renders are merged into the next
render (the fragments are idempotent: the newest state heals whatever was merged away).

The quick sections and the heavy ones (``Section.heavy``: the candidate tables, pictures and
intervals) are rendered on two threads (lanes), each sending its own messages, so a page
sees an epoch end while the lineage is still being drawn; the heavy ones at most once per
``HEAVY_PARTS_SECONDS`` for a run: an optimizer changes its candidates several times an
epoch, and rendering them all kept one thread behind the epochs (p95 2.9 s).

A synchronous send of the same process (a state change: ``live.broadcast``) first waits for
the run's pending renders (``drain``), so a late render never overwrites a newer status.

Example:

    RENDERER.submit(run.group_name, run, ("progress", "epochs"), emitted_at=time.time())
    RENDERER.drain(run.pk)   # before rendering inline what must come after
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections

from training.insight.sections import registry

#: The heavy sections (``Section.heavy``) are sent in a second message, after the quick ones
#: of the same change, and at most once per HEAVY_PARTS_SECONDS for a run (a drain sends
#: them at once): the candidate tables and pictures re-read every candidate, ~120 ms a render
#: on a loaded machine, and an optimizer changes them several times an epoch.
HEAVY_PARTS_SECONDS = 2.0
#: The longest a synchronous send waits for a run's pending renders.
DRAIN_SECONDS = 30.0

logger = logging.getLogger(__name__)


@dataclass
class _Due:
    group: str
    run: Any
    parts: set[str] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)


class LiveRenderer:
    """Renders and sends what ``submit`` was told, off the caller's thread: the quick parts
    on one thread, the heavy ones on another (a slow lineage never holds up an epoch row).

    Args:
        render: ``render(run, parts, **extra) -> html`` (``live.render_parts``).
        send: ``async send(group, html)`` (``live.send``: logs a failed send, never raises).
    """

    def __init__(self, render: Callable[..., str], send: Callable[..., Any]):
        self.quick = _Lane("quick", render, send, interval=0.0)
        self.heavy = _Lane("heavy", render, send, interval=HEAVY_PARTS_SECONDS)

    def submit(self, group: str, run: Any, parts: Any, **extra: Any) -> None:
        """Note that ``parts`` of ``run`` (as just stored) changed; returns at once."""
        heavy_parts = {section.name for section in registry.SECTIONS if section.heavy}
        quick = [part for part in parts if part not in heavy_parts]
        heavy = [part for part in parts if part in heavy_parts]
        if quick:
            self.quick.submit(group, run, quick, extra)
        if heavy:
            self.heavy.submit(group, run, heavy, extra)

    def drain(self, run_id: int, timeout: float = DRAIN_SECONDS) -> bool:
        """Have everything due of ``run_id`` rendered and sent now (its heavy parts too), and
        wait until it is; False on timeout."""
        deadline = time.monotonic() + timeout
        quick = self.quick.drain(run_id, timeout)
        return self.heavy.drain(run_id, max(0.0, deadline - time.monotonic())) and quick


class _Lane:
    """One thread rendering the due parts of each run in turn, a run's at most once per
    ``interval`` seconds (unless the run is drained); changes that come meanwhile merge."""

    def __init__(
        self, name: str, render: Callable[..., str], send: Callable[..., Any], interval: float
    ):
        self.name = name
        self.interval = interval
        self._render = render
        self._send = send
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._changed = threading.Condition()
        self._due: dict[int, _Due] = {}  # insertion order: the order runs changed
        self._busy: set[int] = set()
        self._next_at: dict[int, float] = {}  # when a run may next be rendered
        self._draining: set[int] = set()
        self._thread: threading.Thread | None = None

    def submit(self, group: str, run: Any, parts: list[str], extra: dict[str, Any]) -> None:
        if os.getpid() != self._pid:  # a forked worker child: the parent's thread is not here
            self._reset()
        with self._changed:
            due = self._due.get(run.pk)
            if due is None:
                due = self._due[run.pk] = _Due(group, run)
            due.run = run  # the latest stored state of the run
            due.parts.update(parts)
            due.extra.update(extra)
            self._changed.notify_all()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._work, name=f"trainboard-live-{self.name}", daemon=True
                )
                self._thread.start()

    def drain(self, run_id: int, timeout: float) -> bool:
        if os.getpid() != self._pid:
            return True
        with self._changed:
            self._draining.add(run_id)
            self._changed.notify_all()
            try:
                return self._changed.wait_for(
                    lambda: run_id not in self._due and run_id not in self._busy, timeout
                )
            finally:
                self._draining.discard(run_id)
                self._next_at.pop(run_id, None)

    def _next(self) -> tuple[int, _Due]:
        """Wait for the next run whose render is due (called holding the lock)."""
        while True:
            now = time.monotonic()
            wake = None
            for run_id, due in self._due.items():
                moment = self._next_at.get(run_id, now)
                if run_id in self._draining or now >= moment:
                    del self._due[run_id]
                    if self.interval:
                        self._next_at[run_id] = now + self.interval
                    self._busy.add(run_id)
                    return run_id, due
                wake = moment if wake is None else min(wake, moment)
            self._changed.wait(None if wake is None else max(0.0, wake - now))

    def _work(self) -> None:
        loop = asyncio.new_event_loop()
        while True:
            with self._changed:
                run_id, due = self._next()
            try:
                parts = [part for part in registry.names() if part in due.parts]
                html = self._render(due.run, parts, **due.extra)
                loop.run_until_complete(self._send(due.group, html))
            except Exception:  # a render must never end the thread: the page heals later
                logger.exception("live update of run %s not rendered", run_id)
            finally:
                with self._changed:
                    self._busy.discard(run_id)
                    self._changed.notify_all()
                    idle = not self._due
                if idle:  # this thread's connection, like a request's at its end
                    close_old_connections()
