"""A run whose LM calls wait for the provider's shared rate limit says so on its page.

The engine tells the listener ``rate_limits.watching_waits`` set when each call starts and
stops waiting for a slot (``training.engine.language_models.limits.rate_limits``). A run waits in
bursts (each call a few hundred milliseconds while other runs hold the slots), so the phase is
not flipped per call: one watcher per attempt looks every :data:`CHECK_SECONDS`. Once calls
have been waiting for :data:`SHOW_AFTER_SECONDS` the phase becomes :data:`PHASE` (again, if
the attempt named a new phase meanwhile, e.g. "training" as fit begins: that one is what
comes back); once no call has waited for :data:`CLEAR_AFTER_SECONDS`, the phase it replaced
comes back, unless the attempt set another one. Each change is one row update, emitted as a
``phase`` change (``events.stored``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from asgiref.sync import sync_to_async

from training.engine.language_models.limits.rate_limits import ProviderKey
from training.execution import events, run_state

#: The phase a run shows while its calls wait for the provider's rate limit (the run page
#: explains it as "waiting for the provider's rate limit").
PHASE = "rate limited"
#: Calls must have been waiting this long (seconds) before the run says it waits.
SHOW_AFTER_SECONDS = 0.5
#: No call may have waited for this long (seconds) before the run stops saying so.
CLEAR_AFTER_SECONDS = 2.0
#: How often the watcher looks (seconds).
CHECK_SECONDS = 0.5

_swap = sync_to_async(run_state.swap_phase)


class RateLimitNotice:
    """The listener one attempt installs around its work (``Steps.run``).

    Args:
        run_id: the run.
        attempt: the attempt executing it (a superseded attempt writes nothing).
        group: the run page's channel group.
    """

    def __init__(self, run_id: int, attempt: int, group: str):
        self.run_id, self.attempt, self.group = run_id, attempt, group
        self.waiting = 0  # calls waiting now
        self.since: float | None = None  # when this stretch of waits began
        self.last = 0.0  # when a call last started or stopped waiting
        self.shown = False
        self.previous = ""
        self._watcher: asyncio.Task | None = None

    def wait_started(self, key: ProviderKey) -> None:
        now = time.monotonic()
        if self.since is None:
            self.since = now
        self.waiting += 1
        self.last = now
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    def wait_ended(self, key: ProviderKey) -> None:
        self.waiting = max(0, self.waiting - 1)
        self.last = time.monotonic()

    async def close(self) -> None:
        """Stop watching (the attempt's end writes its own final state)."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(CHECK_SECONDS)
            try:
                await self._look(time.monotonic())
            except Exception:  # a database hiccup: the notice is not worth a failed run
                continue

    async def _look(self, now: float) -> None:
        if self.since is None:
            return
        if self.waiting or now - self.last < CLEAR_AFTER_SECONDS:
            if now - self.since >= SHOW_AFTER_SECONDS:
                swapped = await _swap(self.run_id, self.attempt, PHASE, unless=PHASE)
                if swapped is not None:
                    self.previous, run = swapped
                    self.shown = True
                    await events.stored(self.group, run, events.PHASE)
            return
        self.since = None
        if self.shown:
            self.shown = False
            swapped = await _swap(self.run_id, self.attempt, self.previous, only_from=PHASE)
            if swapped is not None:
                await events.stored(self.group, swapped[1], events.PHASE)
