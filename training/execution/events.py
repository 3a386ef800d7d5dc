"""What happened to a run, said by whoever made it happen: the worker records and emits, it
never renders.

A writer (the attempt a worker executes, its persistence callback, a state transition, the
reaper, a launch or a Cancel in the web process) stores its change first, then says what
happened: the type of each engine event it stored (``batch_end``, ``candidate``...), or one
of the kinds below. What of the run page that changes is its listeners' to know: the one
listener is ``training.insight.live``, registered by ``TrainingConfig.ready`` in every
process that sets Django up (web, worker, reaper), whose sections each name the kinds that
change them (``training.insight.sections``), while no module of ``execution`` imports
``insight``. ``stored`` returns at once: the listener renders on a thread of its own
(``training.insight.live_renderer``), so the training loop never waits on a render. With no
listener, an emit does nothing: the database is the source of truth and the page re-renders
from it.

Example:

    events.run_changed(run, events.STATUS)                        # sync callers
    await events.stored(run.group_name, run, "epoch_end")          # the training loop
"""

from __future__ import annotations

from typing import Any, Protocol

#: The run's status, or a request on it, changed: launched, claimed, paused, cancelled,
#: resumed.
STATUS = "status"
#: What a running run is doing now changed: loading models, rate limited, an evaluation
#: begins (``run.phase``).
PHASE = "phase"
#: An evaluation of the test split was stored (its figures, its examples, its calls).
EVALUATION = "evaluation"
#: A candidate given by hand was taken or refused.
HAND_CANDIDATE = "hand_candidate"
#: The run's row changed in ways no kind says (a finish, a failure, the reaper's resume, a
#: run from code created): everything on its page may have.
ANY = "any"

Kinds = tuple[str, ...]


class Listener(Protocol):
    """What turns a change into what a page shows (``training.insight.live``)."""

    def on_changed(self, run: Any, kinds: Kinds, **extra: Any) -> None: ...

    def on_row_changed(self, run_id: int, kinds: Kinds) -> None: ...

    async def on_stored(self, group: str, run: Any, kinds: Kinds, **extra: Any) -> None: ...


_listeners: list[Listener] = []


def listen(listener: Listener) -> None:
    """Register ``listener`` (once: registering it again changes nothing)."""
    if listener not in _listeners:
        _listeners.append(listener)


def run_changed(run: Any, *kinds: str, **extra: Any) -> None:
    """``run`` (as just read) went through ``kinds`` (sync callers: web process, state
    changes)."""
    for listener in _listeners:
        listener.on_changed(run, kinds, **extra)


def run_row_changed(run_id: int, *kinds: str) -> None:
    """The run's row was just changed by a filtered ``update()``: the listener re-reads it.
    No kind: ``ANY``."""
    for listener in _listeners:
        listener.on_row_changed(run_id, kinds or (ANY,))


async def stored(group: str, run: Any, *kinds: str, **extra: Any) -> None:
    """The worker just stored what ``kinds`` say happened to ``run`` (async callers: the
    training loop; a run from code's post, its batch's kinds at once).

    ``extra`` reaches the templates (``emitted_at``: when the engine emitted the event,
    which the epochs fragment carries for the stream-latency bench).
    """
    for listener in _listeners:
        await listener.on_stored(group, run, kinds, **extra)
