"""A run whose LM calls wait for the provider's shared rate limit says so on its page.

The engine tells the listener ``rate_limits.watching_waits`` set when each call starts and
stops waiting for a slot (``training.engine.language_models.rate_limits``). A run waits in
bursts (each call a few hundred milliseconds while other runs hold the slots), so the phase is
not flipped per call: it becomes :data:`PHASE` once some call has been waiting for
:data:`SHOW_AFTER_SECONDS`, and goes back to what it was once no call has waited for
:data:`CLEAR_AFTER_SECONDS`. Both writes are one row update each and name the ``status`` and
``progress`` fragments (``events.stored``); the way back only replaces :data:`PHASE`, never a
phase the attempt set meanwhile (the next evaluation's).
"""

from __future__ import annotations

import asyncio
import contextlib

from asgiref.sync import sync_to_async

from training.engine.language_models.rate_limits import ProviderKey
from training.execution import events, run_state

#: The phase a run shows while its calls wait for the provider's rate limit (the run page
#: explains it as "waiting for the provider's rate limit").
PHASE = "rate limited"
#: A call must wait this long (seconds) before the run says it waits.
SHOW_AFTER_SECONDS = 0.5
#: No call may have waited for this long (seconds) before the run stops saying so.
CLEAR_AFTER_SECONDS = 2.0


class RateLimitNotice:
    """The listener one attempt installs around its work (``Steps.run``).

    Args:
        run_id: the run.
        attempt: the attempt executing it (a superseded attempt writes nothing).
        group: the run page's channel group.
    """

    def __init__(self, run_id: int, attempt: int, group: str):
        self.run_id, self.attempt, self.group = run_id, attempt, group
        self.waiting = 0
        self.shown = False
        self.previous = ""
        self._task: asyncio.Task | None = None

    def wait_started(self, key: ProviderKey) -> None:
        self.waiting += 1
        if self.waiting == 1:
            self._schedule(self._show_later())

    def wait_ended(self, key: ProviderKey) -> None:
        self.waiting = max(0, self.waiting - 1)
        if self.waiting == 0 and self.shown:
            self._schedule(self._clear_later())

    def _schedule(self, step) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = asyncio.get_running_loop().create_task(step)

    async def close(self) -> None:
        """Stop a pending change (the attempt's end writes its own final state)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _show_later(self) -> None:
        await asyncio.sleep(SHOW_AFTER_SECONDS)
        if self.waiting and not self.shown:
            swapped = await sync_to_async(run_state.swap_phase)(self.run_id, self.attempt, PHASE)
            if swapped is not None:
                self.previous, run = swapped
                self.shown = True
                await events.stored(self.group, run, ("status", "progress"))

    async def _clear_later(self) -> None:
        await asyncio.sleep(CLEAR_AFTER_SECONDS)
        if not self.waiting and self.shown:
            self.shown = False
            swapped = await sync_to_async(run_state.swap_phase)(
                self.run_id, self.attempt, self.previous, only_from=PHASE
            )
            if swapped is not None:
                await events.stored(self.group, swapped[1], ("status", "progress"))
