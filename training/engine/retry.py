"""How a provider request is attempted: a per-model concurrency limit, retries with backoff.

Shared by :class:`LanguageModel` and :class:`EmbeddingModel`; which errors are retried is decided
in :mod:`training.engine.errors`.
"""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from training.engine.errors import LanguageModelError, call_error, is_transient

T = TypeVar("T")

_SEMAPHORES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def semaphore(key: tuple, limit: int) -> asyncio.Semaphore:
    """One semaphore per ``key`` (e.g. (model, api_base)) per running event loop (semaphores
    bind to a loop); ``limit`` applies when the semaphore is first made."""
    loop = asyncio.get_running_loop()
    per_loop = _SEMAPHORES.setdefault(loop, {})
    sem = per_loop.get(key)
    if sem is None:
        sem = per_loop[key] = asyncio.Semaphore(limit)
    return sem


async def call_with_retries(
    request: Callable[[], Awaitable[T]],
    *,
    where: str,
    semaphore_key: tuple,
    max_concurrency: int,
    retries: int,
    backoff: float,
    on_success: Callable[[T, float], Any],
    on_failure: Callable[[BaseException, float], Any],
    jitter: float = 0.0,
) -> T:
    """Run ``request()`` under the key's semaphore, retrying transient errors.

    Each attempt holds the semaphore only while it runs; between attempts the wait starts at
    ``backoff`` seconds and doubles (times ``1 + random() * jitter`` when ``jitter`` is set).
    ``on_success(result, latency)`` / ``on_failure(exc, latency)`` record each attempt (usage).

    Args:
        request: makes one provider request.
        where: names the model in error messages (see :func:`training.engine.errors.call_error`).
        semaphore_key: which concurrency limit this request counts against.
        max_concurrency: the limit, applied when the key's semaphore is first made.
        retries: how many more attempts after the first, for transient errors.
        backoff: seconds before the first retry.
        on_success: called with the result and the attempt's latency in seconds.
        on_failure: called with the exception and the attempt's latency in seconds.
        jitter: relative random extra wait (0.1 adds up to 10%).

    Returns:
        What ``request()`` returned.

    Raises:
        LanguageModelError: (or a subclass) once a non-transient error occurs or the retries
            are spent.
    """
    sem = semaphore(semaphore_key, max_concurrency)
    delay = backoff
    last: BaseException | None = None
    for attempt in range(retries + 1):
        async with sem:
            started = time.perf_counter()
            try:
                result = await request()
            except Exception as exc:
                on_failure(exc, time.perf_counter() - started)
                if not is_transient(exc) or attempt == retries:
                    raise call_error(where, exc, attempt + 1) from exc
                last = exc
            else:
                on_success(result, time.perf_counter() - started)
                return result
        await asyncio.sleep(delay * (1 + random.random() * jitter) if jitter else delay)
        delay *= 2
    raise LanguageModelError(f"{where}: {last}")  # pragma: no cover
