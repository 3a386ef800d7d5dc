"""Provider rate limits shared by every process: the interface the engine calls.

A provider limits an account (or a self-hosted server limits itself), not one process: two
runs on two workers that each keep ``max_concurrency`` requests in flight together overrun a
limit neither sees. So each attempt of :func:`~training.engine.language_models.retry.call_with_retries`
first takes a *slot* from the installed :class:`ProviderLimiter` for its (model, endpoint),
and a 429 tells the limiter to :meth:`~ProviderLimiter.cool_down` that provider, so every run
on it waits, not only the one that got it. The engine only knows this interface; what
enforces it is installed by whoever runs the engine (the dashboard's worker installs, in
``training.execution.provider_limits``, a limiter held in Redis and shared by all workers and
machines: ``RedisProviderLimiter``, outside the engine, in ``training.shared_limits``).
With none installed a call takes no slot: the per-process semaphore
(:mod:`~training.engine.language_models.limits.concurrency`) and the Retry-After-aware backoff of
``retry`` still apply.

A wait is bounded: a slot not granted within the limiter's ``max_wait`` raises
:class:`ProviderLimitTimeout` (a :class:`LanguageModelUnreachable`: ``fit`` stops on it rather
than failing every prediction after the same long wait). While a call waits, the listener
:func:`watching_waits` set is told (the run page says "waiting for the provider's rate limit").

Example:

```python
limiter = MyLimiter(limits=lambda key: Limits(in_flight=4))  # a ProviderLimiter
rate_limits.install(limiter)
async with rate_limits.slot(ProviderKey("openai/gpt-4o-mini", None), tokens=900) as held:
    response = await call_the_provider()
    held.settle(response_tokens)
```
"""

from __future__ import annotations

import contextlib
import contextvars
import email.utils
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Protocol

from training.engine.language_models.errors import LanguageModelUnreachable

#: The default upper bound (seconds) on one request's wait for a slot, in every limiter.
DEFAULT_MAX_WAIT_SECONDS = 300.0
#: The longest cool-down one 429 may impose (a Retry-After beyond it is cut to it).
MAX_COOL_DOWN_SECONDS = 60.0
#: The cool-down after a 429 that names no Retry-After (seconds).
DEFAULT_COOL_DOWN_SECONDS = 1.0


@dataclass(frozen=True)
class ProviderKey:
    """What a limit counts against: one model at one endpoint (None: the provider's own).

    Args:
        model: the litellm model string (``"openai/gpt-4o-mini"``).
        api_base: the endpoint, or None for the provider's default one.
    """

    model: str
    api_base: str | None = None

    def describe(self) -> str:
        return f"model {self.model!r}" + (f" at {self.api_base!r}" if self.api_base else "")


@dataclass(frozen=True)
class Limits:
    """A provider's limits for one :class:`ProviderKey`; None: not limited that way.

    Args:
        in_flight: requests at once, across every process.
        rpm: requests per minute (a sliding 60 s window).
        tpm: tokens per minute (prompt + completion; reserved before, settled after).
    """

    in_flight: int | None = None
    rpm: int | None = None
    tpm: int | None = None

    @property
    def any(self) -> bool:
        return bool(self.in_flight or self.rpm or self.tpm)

    def describe(self) -> str:
        parts = [
            f"{self.in_flight} in flight" if self.in_flight else "",
            f"{self.rpm} requests/min" if self.rpm else "",
            f"{self.tpm} tokens/min" if self.tpm else "",
        ]
        return ", ".join(part for part in parts if part) or "no limit"


class ProviderLimitTimeout(LanguageModelUnreachable):
    """No slot of a provider's shared rate limit within the limiter's ``max_wait``: the
    provider is saturated by other runs (or keeps answering 429), so the run stops."""


class Slot(Protocol):
    """A granted request slot; :meth:`settle` says how many tokens the request really used."""

    def settle(self, tokens: int) -> None: ...


class ProviderLimiter(Protocol):
    """What enforces provider limits across processes (see the module docstring)."""

    def slot(self, key: ProviderKey, tokens: int) -> contextlib.AbstractAsyncContextManager[Slot]:
        """Wait (bounded) for room for one request of at most ``tokens`` tokens; the slot is
        freed on exit. Raises :class:`ProviderLimitTimeout` after ``max_wait`` seconds."""
        ...

    def cool_down(self, key: ProviderKey, seconds: float) -> None:
        """No new request to ``key`` for ``seconds`` (a 429 said so), in every process."""
        ...


class WaitListener(Protocol):
    """Told when a call of the watched work starts and stops waiting for a slot."""

    def wait_started(self, key: ProviderKey) -> None: ...

    def wait_ended(self, key: ProviderKey) -> None: ...


class _NoSlot:
    def settle(self, tokens: int) -> None:
        pass


#: The slot of a call no limiter counts (settling it does nothing).
NO_SLOT = _NoSlot()
_limiter: ProviderLimiter | None = None
_listener: contextvars.ContextVar[WaitListener | None] = contextvars.ContextVar(
    "rate_limit_wait_listener", default=None
)


def install(limiter: ProviderLimiter | None) -> ProviderLimiter | None:
    """Make ``limiter`` the process's (None: none); returns the one it replaces."""
    global _limiter
    previous, _limiter = _limiter, limiter
    return previous


def installed() -> ProviderLimiter | None:
    return _limiter


@contextlib.asynccontextmanager
async def slot(key: ProviderKey, tokens: int) -> AsyncIterator[Slot]:
    """The installed limiter's slot for ``key`` (nothing to wait for when none is installed)."""
    limiter = _limiter
    if limiter is None:
        yield NO_SLOT
        return
    async with limiter.slot(key, tokens) as held:
        yield held


def cool_down(key: ProviderKey, seconds: float) -> None:
    """Tell the installed limiter (if any) that ``key`` answered 429 for ``seconds``."""
    if _limiter is not None:
        _limiter.cool_down(key, min(max(seconds, 0.0), MAX_COOL_DOWN_SECONDS))


@contextlib.contextmanager
def watching_waits(listener: WaitListener) -> Iterator[None]:
    """Within the block (and the tasks it starts), slot waits are reported to ``listener``."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


@contextlib.contextmanager
def waiting(key: ProviderKey) -> Iterator[None]:
    """What a limiter wraps around a wait that is not over at once."""
    listener = _listener.get()
    if listener is not None:
        listener.wait_started(key)
    try:
        yield
    finally:
        if listener is not None:
            listener.wait_ended(key)


def is_rate_limited(exc: BaseException) -> bool:
    """The provider answered 429 (too many requests)."""
    return getattr(exc, "status_code", None) == 429 or any(
        cls.__name__ == "RateLimitError" for cls in type(exc).__mro__
    )


def retry_after(exc: BaseException) -> float | None:
    """Seconds a 429 asks to wait: its ``retry-after-ms`` or ``Retry-After`` header (seconds or
    an HTTP date), from the error or the errors it was raised from; None when it names none."""
    current: BaseException | None = exc
    for _ in range(8):
        if current is None:
            break
        for headers in (getattr(current, "headers", None), _response_headers(current)):
            seconds = _from_headers(headers)
            if seconds is not None:
                return seconds
        current = current.__cause__ or current.__context__
    return None


def _response_headers(exc: BaseException) -> object:
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None)


def _from_headers(headers: object) -> float | None:
    if not headers or not hasattr(headers, "get"):
        return None
    try:
        millis = headers.get("retry-after-ms") or headers.get("Retry-After-Ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000.0)
        value = headers.get("retry-after") or headers.get("Retry-After")
    except (TypeError, ValueError):
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
