"""A coroutine made only when it is first run: what the local provider hands litellm.

litellm runs a custom provider's sync half in an executor thread; for an async call that half
calls the provider's ``acompletion`` / ``aembedding`` and returns what it gives, and the
caller awaits it. A caller cancelled while that thread runs (a run's call cap refusing the
calls it had reserved, a cancelled run, a timeout) drops the result unawaited; were it a
coroutine, Python would report "coroutine 'LocalProvider.acompletion' was never awaited" in
the worker's log for every such call. A :class:`LazyCall` passes litellm's
``asyncio.iscoroutine`` check (it is a ``collections.abc.Coroutine``) but makes the real
coroutine only when it is awaited (or first sent to), so one dropped unstarted leaves nothing.

Example:
    ```python
    def acompletion(self, *args):
        return LazyCall(self._acompletion, *args)
    ```
"""

from __future__ import annotations

import collections.abc
import functools
from collections.abc import Callable, Coroutine, Generator
from typing import Any


class LazyCall(collections.abc.Coroutine):
    """``function(*args, **kwargs)``'s coroutine, made when first awaited or sent to.

    Args:
        function: an ``async def`` function.
        *args, **kwargs: its arguments.
    """

    def __init__(self, function: Callable[..., Coroutine], *args: Any, **kwargs: Any):
        self._make = functools.partial(function, *args, **kwargs)
        self._coroutine: Coroutine | None = None
        self._closed = False

    def _started(self) -> Coroutine:
        if self._coroutine is None:
            if self._closed:  # as a closed coroutine: it never runs after close()
                raise RuntimeError("cannot await a closed LazyCall")
            self._coroutine = self._make()
        return self._coroutine

    def __await__(self) -> Generator[Any, None, Any]:
        return self._started().__await__()

    def send(self, value: Any) -> Any:
        return self._started().send(value)

    def throw(self, *args: Any) -> Any:
        return self._started().throw(*args)

    def close(self) -> None:
        """Close the coroutine; one never started is never made (a later await raises)."""
        self._closed = True
        if self._coroutine is not None:
            self._coroutine.close()
