"""How a provider request is attempted: a per-model concurrency limit, the provider's shared
rate limit, a hard time bound, retries with backoff.

Shared by :class:`LanguageModel` and :class:`EmbeddingModel`; which errors are retried is decided
in :mod:`training.engine.language_models.errors`.

Every attempt is bounded here, whatever the provider does: litellm's own ``timeout`` is a
request option a provider (or a custom one, or a test fake) may not honour, so each attempt also
runs under an ``asyncio`` deadline (:func:`attempt_deadline`) that cancels it. The waits between
attempts are capped too, so a call's total time is bounded by its retries.

Each attempt also holds a slot of the provider's shared limit (:mod:`~training.engine.language_models.limits.rate_limits`:
requests in flight, requests and tokens per minute, across every process, when a limiter is
installed), whose wait is bounded by the limiter. A 429 cools the provider down for every
process (its Retry-After, else :data:`~training.engine.language_models.limits.rate_limits.DEFAULT_COOL_DOWN_SECONDS`),
and the wait before the retry is at least that Retry-After (at most
:data:`~training.engine.language_models.limits.rate_limits.MAX_COOL_DOWN_SECONDS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from training.engine.language_models import budget as budget_mod
from training.engine.language_models.errors import LanguageModelError, call_error, is_transient
from training.engine.language_models.limits import rate_limits
from training.engine.language_models.limits.concurrency import semaphore

T = TypeVar("T")

#: The longest one attempt may take, whatever the model's own ``timeout`` says (None included).
MAX_ATTEMPT_SECONDS = 600.0
#: Seconds the hard deadline allows past the model's ``timeout``, so the provider's own timeout
#: (and its clearer error) normally fires first.
DEADLINE_GRACE_SECONDS = 5.0
#: The longest wait between two attempts (the backoff doubles up to this).
MAX_BACKOFF_SECONDS = 60.0


def attempt_deadline(timeout: float | None) -> float:
    """Seconds after which one attempt is cancelled: the model's ``timeout`` (at most
    :data:`MAX_ATTEMPT_SECONDS`; that when unset or not a positive number) plus the grace."""
    if timeout is None or not timeout > 0:  # None, 0, negatives and NaN mean "no limit"
        limit = MAX_ATTEMPT_SECONDS
    else:
        limit = min(float(timeout), MAX_ATTEMPT_SECONDS)
    return limit + DEADLINE_GRACE_SECONDS


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
    timeout: float | None = None,
    bound: Callable[[], tuple[int, int, float | None]] | None = None,
    spent: Callable[[T], tuple[int, float | None]] | None = None,
    limit_key: rate_limits.ProviderKey | None = None,
) -> T:
    """Run ``request()`` under the key's semaphore, retrying transient errors.

    Each attempt holds the semaphore only while it runs and is cancelled after
    :func:`attempt_deadline` seconds (a ``TimeoutError``: transient, so retried); between
    attempts the wait starts at ``backoff`` seconds and doubles, up to
    :data:`MAX_BACKOFF_SECONDS` (times ``1 + random() * jitter`` when ``jitter`` is set).
    ``on_success(result, latency)`` / ``on_failure(exc, latency)`` record each attempt (usage).

    Args:
        request: makes one provider request.
        where: names the model in error messages (see :func:`training.engine.language_models.errors.call_error`).
        semaphore_key: which concurrency limit this request counts against.
        max_concurrency: the limit, applied when the key's semaphore is first made.
        retries: how many more attempts after the first, for transient errors.
        backoff: seconds before the first retry.
        on_success: called with the result and the attempt's latency in seconds.
        on_failure: called with the exception and the attempt's latency in seconds.
        jitter: relative random extra wait (0.1 adds up to 10%).
        timeout: the model's own request timeout in seconds (None: none), from which the
            hard deadline of each attempt is derived.
        bound: ``() -> (calls, tokens, cost)``, the most one attempt can use; each attempt
            reserves it in the active budgets (:mod:`~training.engine.language_models.budget`)
            before it starts, so a cap is never passed (None: nothing reserved).
        spent: ``result -> (tokens, cost)``, what a successful attempt used (its
            reservation is settled with it; a failed attempt counts its call only).
        limit_key: the provider limit the attempts count against (None: none); each attempt
            takes a slot of the installed limiter for it, sized by ``bound``'s tokens.

    Returns:
        What ``request()`` returned.

    Raises:
        LanguageModelError: (or a subclass) once a non-transient error occurs or the retries
            are spent.
        BudgetExhausted: when an attempt could pass a cap of an active budget (it never
            starts), or the budget's time ran out while it was in flight (it is cancelled).
        ProviderLimitTimeout: no slot of the provider's shared limit within the limiter's
            ``max_wait``.
    """
    sem = semaphore(semaphore_key, max_concurrency)
    deadline = attempt_deadline(timeout)
    delay = min(max(backoff, 0.0), MAX_BACKOFF_SECONDS)
    last: BaseException | None = None
    for attempt in range(retries + 1):
        pause = delay * (1 + random.random() * jitter) if jitter else delay
        async with sem, _provider_slot(limit_key, bound) as held:
            # Reserved once the slot is held (a wait for it costs nothing), in one step:
            # concurrent attempts can never jointly pass a cap.
            reservation = budget_mod.reserve_for(bound) if bound is not None else None
            started = time.perf_counter()
            try:
                result = await _within(_attempt_seconds(deadline, reservation), request)
            except Exception as exc:
                if reservation is not None:
                    reservation.settle()
                    expired = reservation.expired()
                    if expired is not None:  # the budget's time ran out mid-attempt
                        on_failure(expired, time.perf_counter() - started)
                        raise expired from exc
                on_failure(exc, time.perf_counter() - started)
                if not is_transient(exc) or attempt == retries:
                    raise call_error(where, exc, attempt + 1) from exc
                pause = max(pause, _cooled_down(limit_key, exc))
                last = exc
            except BaseException as exc:  # cancelled (interrupt, a cap): the call was made
                if reservation is not None:
                    reservation.settle()
                on_failure(exc, time.perf_counter() - started)
                raise
            else:
                used = spent(result) if spent is not None else (0, 0.0)
                if reservation is not None:
                    reservation.settle(*used)
                held.settle(used[0])
                on_success(result, time.perf_counter() - started)
                return result
        await asyncio.sleep(pause)
        delay = min(delay * 2, MAX_BACKOFF_SECONDS)
    raise LanguageModelError(f"{where}: {last}")  # pragma: no cover


def _provider_slot(
    key: rate_limits.ProviderKey | None, bound: Callable[[], tuple[int, int, float | None]] | None
) -> contextlib.AbstractAsyncContextManager[rate_limits.Slot]:
    """The attempt's slot of the provider's shared limit, sized by its token bound."""
    if key is None:
        return contextlib.nullcontext(rate_limits.NO_SLOT)
    return rate_limits.slot(key, bound()[1] if bound is not None else 0)


def _cooled_down(key: rate_limits.ProviderKey | None, exc: BaseException) -> float:
    """After a 429: every process's requests to ``key`` wait its Retry-After (or the default
    cool-down); returns how long this call waits at least before its retry (0: not a 429)."""
    if not rate_limits.is_rate_limited(exc):
        return 0.0
    asked = rate_limits.retry_after(exc)
    seconds = rate_limits.DEFAULT_COOL_DOWN_SECONDS if asked is None else asked
    seconds = min(seconds, rate_limits.MAX_COOL_DOWN_SECONDS)
    if key is not None:
        rate_limits.cool_down(key, seconds)
    return seconds


def _attempt_seconds(deadline: float, reservation: budget_mod.Reservation | None) -> float:
    """The attempt's hard deadline, cut to what is left of a budget's time."""
    left = reservation.remaining_seconds() if reservation is not None else None
    return deadline if left is None else max(0.0, min(deadline, left))


async def _within(deadline: float, request: Callable[[], Awaitable[T]]) -> T:
    """``await request()``, cancelled after ``deadline`` seconds with a TimeoutError saying so."""
    bound = asyncio.timeout(deadline)
    try:
        async with bound:
            return await request()
    except TimeoutError as exc:
        if not bound.expired():  # the provider's own timeout: its error says more
            raise
        raise TimeoutError(f"no answer within {deadline:g} s (hard limit), cancelled") from exc
