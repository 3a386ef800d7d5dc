"""What changed on a run, said by whoever changed it: the worker records and emits, it never
renders.

A writer (the attempt a worker executes, its persistence callback, a state transition, the
reaper, a launch or a Cancel in the web process) stores its change first, then names the
fragments of the run page that the change touched (``ALL_PARTS``; ``EVENT_PARTS`` for each
stored engine event). Its listeners render those fragments and send them: the one listener
is ``training.insight.live``, registered by ``TrainingConfig.ready`` in every process that
sets Django up (web, worker, reaper), while no module of ``execution`` imports ``insight``.
``stored`` returns at once: the listener renders on a thread of its own
(``training.insight.live_renderer``), so the training loop never waits on a render. With no listener, an emit does nothing: the database is the source of truth and
the page re-renders from it.

Example:

    events.run_changed(run, ("status", "actions", "progress"))      # sync callers
    await events.stored(run.group_name, run, ("progress",))          # the training loop
"""

from __future__ import annotations

import time
from typing import Any, Protocol

#: Every fragment of the run page (the names of its ``training/partials/run_<part>.html``):
#: each section of the page is one, so each is live.
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
    "examples",
    "traces",
    "candidate_confidence",
)
# The fragments each stored engine event changes.
EVENT_PARTS = {
    "train_begin": ("status", "progress"),
    # The forecast's "actual so far", the usage and the traced calls are one count (stored
    # together: ``traces``): sent together, never apart.
    "batch_end": ("progress", "usage", "spend", "forecast", "traces"),
    # The candidate tables and pictures are not here: candidate and selection events send
    # them; an epoch end sends only what a throttled candidate event still owes (once per
    # change, not once per epoch: ``PartsThrottle``).
    "epoch_end": ("progress", "usage", "epochs", "chart", "spend", "forecast", "traces"),
    "candidate": ("leaderboard", "population", "lineage", "candidate_confidence"),
    "paused": ("progress",),  # the checkpoint saved; the finish sends status and actions
    "optimizer_error": ("leaderboard",),
    "candidate_refused": ("leaderboard",),
    "selection": ("leaderboard", "candidate_confidence"),
    "final_selection": ("leaderboard", "candidate_confidence"),
}
# Fragments that re-read every candidate (embeddings included; the selection section's
# bootstrap intervals): a candidate event sends them at most once per SLOW_PARTS_SECONDS
# (``PartsThrottle``); the next epoch_end sends those a throttled event still owes, and the
# run's finish sends every part.
SLOW_PARTS = ("population", "lineage", "candidate_confidence")
SLOW_PARTS_SECONDS = 5.0
#: Slow fragments a reader studies rather than follows (the Selection section's intervals and
#: verdicts): sent at most once per RARE_PARTS_SECONDS (what its page poll was), an epoch end
#: not forcing them; the final selection and the run's finish always send them.
RARE_PARTS = ("candidate_confidence",)
RARE_PARTS_SECONDS = 15.0

#: What a stored evaluation changes (the test split's figures, its examples, its calls).
EVALUATION_PARTS = ("evaluations", "examples", "traces", "usage", "spend", "forecast", "status")

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
    candidate event comes within ``seconds`` of the last time they were sent; the slow ones
    left out are owed, and sent by the next event allowed to (an epoch_end always is). The
    rare ones (``RARE_PARTS``) wait ``rare_seconds`` between sends whatever the event, but for
    the final selection (and the finish, which sends every part).

    Why: an optimizer can store a candidate every batch; re-reading and re-sending the map and
    the tree (tens of kilobytes) for each kept the page's socket and the browser busy for
    nothing a person can follow. Sending them at every epoch end as well, changed or not, made
    each epoch of a run render ~100 ms more for nothing (``bench/stream_latency.py``).

    Args:
        seconds: the least time between two sends of the slow fragments by candidate events.
        rare_seconds: the least time between two sends of the rare ones (the Selection
            section: ``bench/stream_latency.py`` p95 ~40 ms higher when every epoch sent it).

    Example:
        >>> throttle = PartsThrottle()
        >>> throttle.parts("candidate")
        ('leaderboard', 'population', 'lineage', 'candidate_confidence')
        >>> throttle.parts("candidate")
        ('leaderboard',)
        >>> throttle.parts("epoch_end")[-2:]
        ('population', 'lineage')
        >>> throttle.parts("final_selection")  # the Selection section, owed until now
        ('leaderboard', 'candidate_confidence')
        >>> "lineage" in throttle.parts("epoch_end")
        False
    """

    def __init__(
        self, seconds: float = SLOW_PARTS_SECONDS, rare_seconds: float = RARE_PARTS_SECONDS
    ):
        self.seconds = seconds
        self.rare_seconds = rare_seconds
        self._last_slow = float("-inf")
        self._last_rare = float("-inf")
        self._owed: set[str] = set()

    def parts(self, kind: str) -> tuple[str, ...]:
        parts = EVENT_PARTS[kind]
        self._owed.update(part for part in parts if part in SLOW_PARTS)
        quick = tuple(part for part in parts if part not in SLOW_PARTS)
        if not self._owed:
            return quick
        now = time.monotonic()
        sent: set[str] = set()
        if kind == "epoch_end" or now - self._last_slow >= self.seconds:
            self._last_slow = now
            sent.update(part for part in self._owed if part not in RARE_PARTS)
        if kind == "final_selection" or now - self._last_rare >= self.rare_seconds:
            if self._owed & set(RARE_PARTS):
                self._last_rare = now
                sent.update(part for part in self._owed if part in RARE_PARTS)
        self._owed -= sent
        return quick + tuple(part for part in SLOW_PARTS if part in sent)
