"""Shared by the engine tests that fit and then read the structured events (docs/ARCHITECTURE.md,
"Events"): a callback that records them, and the keys a ``candidate`` event must carry, so
the event contract is written down once for every test that checks it."""

from __future__ import annotations

import training.engine as synalinks

#: What every ``candidate`` event carries besides ``type`` and ``epoch``.
CANDIDATE_EVENT_KEYS = frozenset(
    {
        "variable",
        "candidate_id",
        "parent_ids",
        "operation",
        "value",
        "reward",
        "novelty",
        "status",
    }
)


class EventRecorder(synalinks.callbacks.Callback):
    """Keeps every ``on_event`` event in order; ``of(kind)`` filters them by ``type``."""

    def __init__(self):
        super().__init__()
        self.events = []

    async def on_event(self, event):
        self.events.append(event)

    def of(self, kind):
        return [e for e in self.events if e["type"] == kind]
