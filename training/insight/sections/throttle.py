"""Throttle: which of the sections an event of a run changed are sent now.

A section with ``at_most_every`` (the candidate map, the tree, the Selection section) is
sent at most that often by events; a change that comes sooner is owed, and sent by the next
event of the run once the time has passed, or by one of its ``catch_up_on`` kinds (an epoch
end heals the map and the tree; the final selection, the Selection section). An event of
kind ``any`` (the run's finish) sends every section and forgets what was owed.

Why per run, in the process that renders: the worker says only what happened; whichever of
its writers says it (the persistence callback, a run from code's posts), the page's sends of
a run are spaced the same.

Example:
    >>> throttle = Throttle()
    >>> [s.name for s in throttle.due(7, {"candidate"})]
    ['leaderboard', 'candidate_confidence', 'population', 'lineage']
    >>> [s.name for s in throttle.due(7, {"candidate"})]
    ['leaderboard']
    >>> [s.name for s in throttle.due(7, {"epoch_end"})][-2:]
    ['population', 'lineage']
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from training.execution import events
from training.insight.sections import registry
from training.insight.sections.section import Section

#: Runs whose throttle a process keeps (the least recently changed are forgotten first: a
#: forgotten run's next change sends its sections at once).
RUNS_KEPT = 1000


@dataclass
class _RunThrottle:
    last_sent: dict[str, float] = field(default_factory=dict)
    owed: set[str] = field(default_factory=set)


class Throttle:
    """The throttled sections' last sends and what each run still owes, for one process.

    Args:
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._runs: OrderedDict[int, _RunThrottle] = OrderedDict()
        self._lock = threading.Lock()

    def due(self, run_id: int, kinds: Iterable[str]) -> list[Section]:
        """The sections an event of ``kinds`` of run ``run_id`` sends now, in the page's
        order: those it changed, less the throttled ones sent too recently, plus those owed
        that may go now."""
        kinds = set(kinds)
        changed = registry.changed_by(kinds)
        with self._lock:
            if events.ANY in kinds:
                self._runs.pop(run_id, None)
                return changed
            state = self._runs.get(run_id)
            throttled = [section for section in changed if section.at_most_every]
            if state is None and not throttled:
                return changed  # nothing owed, nothing to note
            if state is None:
                state = self._runs[run_id] = _RunThrottle()
                while len(self._runs) > RUNS_KEPT:
                    self._runs.popitem(last=False)
            self._runs.move_to_end(run_id)
            state.owed.update(section.name for section in throttled)
            now = self.clock()
            owed = [section for section in registry.SECTIONS if section.name in state.owed]
            sent = {
                section.name
                for section in owed
                if kinds.intersection(section.catch_up_on)
                or now - state.last_sent.get(section.name, float("-inf")) >= section.at_most_every
            }
            state.last_sent.update(dict.fromkeys(sent, now))
            state.owed = {section.name for section in owed} - sent
        quick = {section.name for section in changed if not section.at_most_every}
        return [section for section in registry.SECTIONS if section.name in sent | quick]
