"""The per-model concurrency limit shared by every request to one provider endpoint.

One :class:`asyncio.Semaphore` per key (e.g. ``(model, api_base)``) per running event loop:
:func:`training.engine.language_models.retry.call_with_retries` holds it around each attempt,
and the local provider (:mod:`trainboard_local.provider`) around each chat call on its
model instances. It imports nothing of the engine, so any part of it (the local provider
included) can use it without pulling in the language model and its errors.
"""

from __future__ import annotations

import asyncio
import weakref

_SEMAPHORES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def semaphore(key: tuple, limit: int) -> asyncio.Semaphore:
    """One semaphore per ``key`` (e.g. (model, api_base)) per running event loop (semaphores
    bind to a loop); ``limit`` applies when the semaphore is first made.

    Args:
        key: what the limit counts against (requests with equal keys share it).
        limit: how many may hold it at once; used only when the key's semaphore is first made.

    Returns:
        The running loop's semaphore for ``key``.
    """
    loop = asyncio.get_running_loop()
    per_loop = _SEMAPHORES.setdefault(loop, {})
    sem = per_loop.get(key)
    if sem is None:
        sem = per_loop[key] = asyncio.Semaphore(limit)
    return sem
