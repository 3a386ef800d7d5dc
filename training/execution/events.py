"""What changed on a run, said by whoever changed it: the worker records and emits, it never
renders.

A writer (the attempt a worker executes, its persistence callback, a state transition, the
reaper, a launch or a Cancel in the web process) stores its change first, then names the
fragments of the run page that the change touched (``ALL_PARTS``; ``EVENT_PARTS`` for each
stored engine event). Its listeners render those fragments and send them: the one listener
is ``training.insight.live``, registered by ``TrainingConfig.ready`` in every process that
sets Django up (web, worker, reaper), so the rendering stays in the process and at the moment
it always was (the stream's latency is unchanged) while no module of ``execution`` imports
``insight``. With no listener, an emit does nothing: the database is the source of truth and
the page re-renders from it.

Example:

    events.run_changed(run, ("status", "actions", "progress"))      # sync callers
    await events.stored(run.group_name, run, ("progress",))          # the training loop
"""

from __future__ import annotations

import time
from typing import Any, Protocol

#: Every fragment of the run page (the names of its ``training/partials/run_<part>.html``).
ALL_PARTS = (
    "status",
    "actions",
    "progress",
    "usage",
    "epochs",
    "chart",
    "leaderboard",
    "evaluations",
    "spend",
    "population",
    "lineage",
    "forecast",
)
# The fragments each stored engine event changes.
EVENT_PARTS = {
    "train_begin": ("status", "progress"),
    "epoch_begin": ("progress",),
    "batch_end": ("progress", "usage", "spend"),
    "epoch_end": (
        "progress",
        "usage",
        "epochs",
        "chart",
        "leaderboard",
        "spend",
        "forecast",
        "population",
        "lineage",
    ),
    "candidate": ("leaderboard", "population", "lineage"),
    "optimizer_error": ("leaderboard",),
    "candidate_refused": ("leaderboard",),
    "selection": ("leaderboard",),
}
# Fragments that re-read every candidate (embeddings included): a candidate event sends them
# at most once per SLOW_PARTS_SECONDS (``PartsThrottle``); each epoch_end sends them.
SLOW_PARTS = ("population", "lineage")
SLOW_PARTS_SECONDS = 5.0

Parts = tuple[str, ...] | list[str]


class Listener(Protocol):
    """What renders and sends the fragments a change touched (``training.insight.live``)."""

    def broadcast(self, run: Any, parts: Parts, **extra: Any) -> None: ...

    def broadcast_run(self, run_id: int, parts: Parts) -> None: ...

    async def send_parts(self, group: str, run: Any, parts: Parts, **extra: Any) -> None: ...


_listeners: list[Listener] = []


def listen(listener: Listener) -> None:
    """Register ``listener`` (once: registering it again changes nothing)."""
    if listener not in _listeners:
        _listeners.append(listener)


def run_changed(run: Any, parts: Parts = ALL_PARTS, **extra: Any) -> None:
    """``run`` (as just read) changed ``parts`` (sync callers: web process, state changes)."""
    for listener in _listeners:
        listener.broadcast(run, parts, **extra)


def run_row_changed(run_id: int, parts: Parts = ALL_PARTS) -> None:
    """The run's row was just changed by a filtered ``update()``: the listener re-reads it."""
    for listener in _listeners:
        listener.broadcast_run(run_id, parts)


async def stored(group: str, run: Any, parts: Parts, **extra: Any) -> None:
    """The worker just stored a change of ``run`` (async callers: the training loop).

    ``extra`` reaches the templates (``emitted_at``: when the engine emitted the event,
    which the epochs fragment carries for the stream-latency bench).
    """
    for listener in _listeners:
        await listener.send_parts(group, run, parts, **extra)


class PartsThrottle:
    """Which fragments an event of one run sends: ``EVENT_PARTS``, less the slow ones when a
    candidate event comes within ``seconds`` of the last time they were sent.

    Why: an optimizer can store a candidate every batch; re-reading and re-sending the map and
    the tree (tens of kilobytes) for each kept the page's socket and the browser busy for
    nothing a person can follow. The next epoch_end sends the latest state in any case.

    Args:
        seconds: the least time between two sends of the slow fragments by candidate events.

    Example:
        >>> throttle = PartsThrottle()
        >>> throttle.parts("candidate")
        ('leaderboard', 'population', 'lineage')
        >>> throttle.parts("candidate")
        ('leaderboard',)
    """

    def __init__(self, seconds: float = SLOW_PARTS_SECONDS):
        self.seconds = seconds
        self._last_slow = float("-inf")

    def parts(self, kind: str) -> tuple[str, ...]:
        parts = EVENT_PARTS[kind]
        if not any(part in SLOW_PARTS for part in parts):
            return parts
        now = time.monotonic()
        if kind == "epoch_end" or now - self._last_slow >= self.seconds:
            self._last_slow = now
            return parts
        return tuple(part for part in parts if part not in SLOW_PARTS)
