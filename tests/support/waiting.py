"""Waiting in tests for what another thread or process does: back the moment it holds.

Team rule: tests wait on events, never on sleeps. In-process work gives an event to block on
(``threading.Event``, ``asyncio.Event``); where the thing waited for is another process's
state (a database row, a Redis key, an HTTP answer, a log line) nothing signals its change,
so :func:`until` looks again every ``POLL_SECONDS`` and returns as soon as the condition
holds, failing with a message that says what never happened. The poll interval only bounds
how late the test notices; it never decides whether the test passes.

Example:
    ```python
    until(lambda: run_field(live, run_id, "status") == "succeeded", 120, "the run finished")
    ```
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

#: Seconds between two looks at a state that sends no signal when it changes.
POLL_SECONDS = 0.05

T = TypeVar("T")


def _failure(what: str | Callable[[], str], timeout: float) -> AssertionError:
    said = what() if callable(what) else what
    return AssertionError(f"not within {timeout:g} s: {said}")


def until(
    condition: Callable[[], T],
    timeout: float,
    what: str | Callable[[], str],
    poll: float = POLL_SECONDS,
) -> T:
    """``condition()``'s first truthy value, asked until it gives one.

    Args:
        condition: reads the state (may raise to fail at once, e.g. a process that exited).
        timeout: seconds before giving up.
        what: what was awaited, for the failure (a callable: read when it fails).
        poll: seconds between two reads (a read that costs a process start: more).

    Raises:
        AssertionError: ``condition()`` never held within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise _failure(what, timeout)
        time.sleep(poll)


async def until_async(
    condition: Callable[[], T | Awaitable[T]],
    timeout: float,
    what: str | Callable[[], str],
    poll: float = POLL_SECONDS,
) -> T:
    """:func:`until` for a coroutine test: the loop runs between two reads."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if asyncio.iscoroutine(found):
            found = await found
        if found:
            return found
        if time.monotonic() >= deadline:
            raise _failure(what, timeout)
        await asyncio.sleep(poll)
