"""When a child of ``make run`` dies: start it again after a pause that doubles.

Why: one process that dies (a worker killed by the kernel, a web server that crashed) used
to stop the whole stack, web server and reaper included, until a person noticed. A child is
now started again after ``FIRST_PAUSE`` seconds, doubling up to ``LONGEST_PAUSE`` while it
keeps dying, and back to the first pause once it has stayed up ``STEADY_SECONDS`` (the
backoff of supervisord and systemd's ``Restart=on-failure``, kept small: ``make run`` is one
machine). Each restart is one line on ``make run``'s output, with the time and the child's
log file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

FIRST_PAUSE = 1.0
LONGEST_PAUSE = 60.0
STEADY_SECONDS = 60.0


@dataclass
class Restarts:
    """The restart schedule of each child, by name (``clock``: seconds, monotonic)."""

    clock: callable = time.monotonic
    started_at: dict[str, float] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    due: dict[str, float] = field(default_factory=dict)

    def started(self, name: str) -> None:
        self.started_at[name] = self.clock()
        self.due.pop(name, None)

    def died(self, name: str) -> float:
        """Schedule ``name``'s restart; returns the pause before it, in seconds."""
        now = self.clock()
        if now - self.started_at.get(name, now) >= STEADY_SECONDS:
            self.failures[name] = 0
        self.failures[name] = self.failures.get(name, 0) + 1
        pause = min(LONGEST_PAUSE, FIRST_PAUSE * 2 ** (self.failures[name] - 1))
        self.due[name] = now + pause
        return pause

    def ready(self) -> list[str]:
        """The children whose pause is over (to be started now)."""
        now = self.clock()
        return [name for name, at in self.due.items() if at <= now]

    def waiting(self, name: str) -> bool:
        return name in self.due
