"""Provider limits held in Redis, so every worker on every machine shares them.

Why not litellm's own: its ``Router(max_parallel_requests=…)`` counts requests in flight in a
process-local object (``MaxParallelRequestsLimit``, kept ``local_only`` in the routing cache)
and answers a full deployment with an immediate 429 instead of a wait; its Redis-backed
``usage-based-routing-v2`` counts requests per fixed clock minute and likewise refuses rather
than waits, and counts tokens only after a call (a burst overruns the limit); the
Redis-backed parallel request limiters are hooks of the litellm *proxy* server (FastAPI,
per API key/team, "not yet ready for production"). None bounds requests in flight across
processes or lets a call wait its turn, so this module holds three small Redis primitives,
each one Lua script (atomic, the Redis server's clock, so machines' clocks never disagree):

- **requests in flight**: a semaphore of *leases* in a sorted set (member: the lease id,
  score: when it expires). A grant adds a lease; a thread renews every held lease every
  ``lease_seconds / 3``; release removes it. A killed worker renews nothing, so its slots
  free themselves within ``lease_seconds``.
- **requests and tokens per minute**: a sliding 60 s log in a sorted set (member
  ``<lease id>:<tokens>``, score: when it was granted). A grant reserves the request's token
  bound; :meth:`_Held.settle` replaces it with what the request used.
- **cool-down**: after a 429 a key holds the time until which nobody may send (extended,
  never shortened), so every run on that provider waits its Retry-After.

A key with no limits at all (``Limits()``: an offline model) never touches Redis.

A refused grant says how long to wait when it knows (a window entry leaving, the cool-down
ending); a full semaphore is polled with a growing, jittered interval. Every wait ends within
``max_wait`` seconds (:class:`~training.engine.language_models.limits.rate_limits.ProviderLimitTimeout`).
When Redis cannot be asked, each process keeps the limits by itself until Redis answers
again (:class:`LocalFallback`, logged once per outage): its share of each limit
(``fallback_share``, e.g. one over the worker processes of a machine), and waits, saying
so, like a refusal from Redis. Across several machines that is more than the limit, never
unthrottled.

Example:

```python
limiter = RedisProviderLimiter(
    "redis://localhost:6379/0", limits=lambda key: Limits(in_flight=4, rpm=500)
)
rate_limits.install(limiter)
```
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable

from training.engine.language_models.limits.rate_limits import (
    DEFAULT_MAX_WAIT_SECONDS,
    Limits,
    ProviderKey,
    ProviderLimitTimeout,
    waiting,
)

logger = logging.getLogger(__name__)

#: The sliding window of requests/tokens per minute (milliseconds).
WINDOW_MS = 60_000
#: How long a lease lives without renewal: a killed worker's slots are free after this.
DEFAULT_LEASE_SECONDS = 30.0
#: First and longest interval between two asks for a slot of a full semaphore (seconds).
POLL_SECONDS = (0.05, 0.2)

_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cool = tonumber(redis.call('GET', KEYS[3]) or '0')
if cool > now then return {0, cool - now, 'cool-down after a 429'} end
local in_flight = tonumber(ARGV[3])
if in_flight > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if redis.call('ZCARD', KEYS[1]) >= in_flight then return {0, -1, 'requests in flight'} end
end
local rpm = tonumber(ARGV[4])
local tpm = tonumber(ARGV[5])
local tokens = tonumber(ARGV[6])
local window = tonumber(ARGV[7])
if rpm > 0 or tpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  if rpm > 0 and redis.call('ZCARD', KEYS[2]) >= rpm then
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {0, math.max(1, tonumber(oldest[2]) + window - now), 'requests per minute'}
  end
  if tpm > 0 then
    local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
    local used = 0
    for i = 1, #entries, 2 do
      used = used + tonumber(string.match(entries[i], ':(%d+)$') or '0')
    end
    if used > 0 and used + tokens > tpm then
      local freed = 0
      for i = 1, #entries, 2 do
        freed = freed + tonumber(string.match(entries[i], ':(%d+)$') or '0')
        if used - freed + tokens <= tpm then
          return {0, math.max(1, tonumber(entries[i + 1]) + window - now), 'tokens per minute'}
        end
      end
      return {0, window, 'tokens per minute'}
    end
  end
end
if in_flight > 0 then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
end
if rpm > 0 or tpm > 0 then
  redis.call('ZADD', KEYS[2], now, ARGV[1] .. ':' .. ARGV[6])
  redis.call('PEXPIRE', KEYS[2], window * 2)
end
return {1, 0, 'granted'}
"""

# Renew the held leases that still exist (XX: a lease released meanwhile is not revived).
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], lease * 2)
return 1
"""

# A request's reserved tokens replaced by what it used (same time in the window).
_SETTLE = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
if not score then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
redis.call('ZADD', KEYS[1], score, ARGV[1] .. ':' .. ARGV[3])
return 1
"""

# Nobody sends before now + ARGV[1] ms (an earlier end never shortens a longer cool-down).
_COOL_DOWN = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ms = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if now + ms > current then redis.call('SET', KEYS[1], now + ms, 'PX', ms) end
return 1
"""


class RedisProviderLimiter:
    """A :class:`~training.engine.language_models.limits.rate_limits.ProviderLimiter` on one Redis.

    Args:
        url: the Redis server (``redis://host:6379/0``, ``unix:///path/redis.sock``).
        limits: ``ProviderKey -> Limits``, asked once per key (each process caches it).
        max_wait: the most seconds one request waits for a slot before
            :class:`~training.engine.language_models.limits.rate_limits.ProviderLimitTimeout`.
        lease_seconds: how long a slot outlives its holder's last renewal.
        prefix: put before every key, so one Redis serves other things too.
        socket_timeout: seconds any Redis command may take.
        hint: what the timeout message tells the user to do (e.g. the setting to raise).
        fallback_share: the part of each limit this process keeps by itself while Redis
            cannot be asked (:class:`LocalFallback`).

    Example:

    ```python
    limiter = RedisProviderLimiter(url, limits=lambda key: Limits(in_flight=2))
    async with limiter.slot(ProviderKey("openai/gpt-4o-mini"), tokens=500) as held:
        held.settle(320)
    ```
    """

    def __init__(
        self,
        url: str,
        limits: Callable[[ProviderKey], Limits],
        *,
        max_wait: float = DEFAULT_MAX_WAIT_SECONDS,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        prefix: str = "trainboard:ratelimit:",
        socket_timeout: float = 3.0,
        hint: str = "",
        fallback_share: float = 1.0,
    ):
        import redis

        if max_wait <= 0 or lease_seconds <= 0:
            raise ValueError("max_wait and lease_seconds must be positive")
        self.url = url
        self.max_wait = float(max_wait)
        self.lease_ms = int(lease_seconds * 1000)
        self.prefix = prefix
        self.hint = hint
        self._limits_of = limits
        self._limits: dict[ProviderKey, Limits] = {}
        self._client = redis.Redis.from_url(
            url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout
        )
        self._errors = (redis.RedisError, OSError)
        self._acquire = self._client.register_script(_ACQUIRE)
        self._renew = self._client.register_script(_RENEW)
        self._settle = self._client.register_script(_SETTLE)
        self._cool_down = self._client.register_script(_COOL_DOWN)
        self._held: dict[str, set[str]] = {}  # in-flight key -> lease ids held here
        self._lock = threading.Lock()
        self._renewer: threading.Thread | None = None
        self._down = False
        self.fallback = LocalFallback(fallback_share)

    # -- keys and limits -------------------------------------------------------------------
    def keys(self, key: ProviderKey) -> tuple[str, str, str]:
        """(in-flight set, per-minute window, cool-down) Redis keys of ``key``."""
        digest = hashlib.sha256(f"{key.model}\0{key.api_base or ''}".encode()).hexdigest()[:24]
        base = f"{self.prefix}{{{digest}}}"  # one hash tag: the three keys share a cluster slot
        return f"{base}:inflight", f"{base}:window", f"{base}:cooldown"

    def limits(self, key: ProviderKey) -> Limits:
        found = self._limits.get(key)
        if found is None:
            found = self._limits[key] = self._limits_of(key)
        return found

    # -- the slot ----------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def slot(self, key: ProviderKey, tokens: int) -> AsyncIterator[_Held]:
        limits = self.limits(key)
        if not limits.any:  # nothing limits this key (an offline model): no Redis at all
            yield _Held(self, key, "", 0, counted=False, windowed=False)
            return
        lease = uuid.uuid4().hex
        held = await self._wait_for_grant(key, limits, lease, max(0, int(tokens)))
        try:
            yield held
        finally:
            held.release()

    async def _wait_for_grant(
        self, key: ProviderKey, limits: Limits, lease: str, tokens: int
    ) -> _Held:
        deadline = time.monotonic() + self.max_wait
        poll = POLL_SECONDS[0]
        told = False  # whether the listener knows this call waits
        with contextlib.ExitStack() as wait:
            while True:
                answer = await self._ask(key, limits, lease, tokens)
                if answer is None:  # Redis unreachable: this process keeps its share alone
                    granted, wait_ms, reason = self.fallback.ask(key, limits, lease, tokens)
                    if granted:
                        return _Held(
                            self, key, lease, tokens, counted=True, windowed=True, local=True
                        )
                else:
                    granted, wait_ms, reason = answer
                if granted:
                    return _Held(
                        self,
                        key,
                        lease,
                        tokens,
                        counted=bool(limits.in_flight),
                        windowed=bool(limits.rpm or limits.tpm),
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProviderLimitTimeout(self._timeout_message(key, limits, reason))
                if not told:  # the first refusal: this call now waits
                    wait.enter_context(waiting(key))
                    told = True
                if wait_ms > 0:  # the limiter knows when room comes back
                    pause = wait_ms / 1000.0 + random.uniform(0.0, POLL_SECONDS[0])
                else:
                    pause = poll * random.uniform(0.5, 1.0)
                    poll = min(poll * 2, POLL_SECONDS[1])
                await asyncio.sleep(min(pause, left))

    def _timeout_message(self, key: ProviderKey, limits: Limits, reason: str) -> str:
        text = (
            f"{key.describe()}: no request slot under the provider's rate limit "
            f"({limits.describe()}) within {self.max_wait:g} s (held back by: {reason}). "
            "Other runs are using this provider, or it keeps answering 429 (too many requests)."
        )
        return f"{text} {self.hint}".strip()

    async def _ask(
        self, key: ProviderKey, limits: Limits, lease: str, tokens: int
    ) -> tuple[bool, int, str] | None:
        """One grant attempt in a worker thread; a grant the caller no longer awaits (it was
        cancelled meanwhile) is released at once."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, self._ask_now, key, limits, lease, tokens)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:

            def give_back(done: asyncio.Future) -> None:
                if not done.cancelled() and done.exception() is None:
                    answer = done.result()
                    if answer is not None and answer[0]:
                        _Held(self, key, lease, tokens, True, True).release()

            future.add_done_callback(give_back)
            raise

    def _ask_now(
        self, key: ProviderKey, limits: Limits, lease: str, tokens: int
    ) -> tuple[bool, int, str] | None:
        in_flight, window, cool = self.keys(key)
        args = [lease, self.lease_ms, limits.in_flight or 0, limits.rpm or 0]
        args += [limits.tpm or 0, tokens, WINDOW_MS]
        try:
            granted, wait_ms, reason = self._acquire(keys=[in_flight, window, cool], args=args)
        except self._errors as exc:
            self._failed("asking for a slot", exc)
            return None
        self._down = False
        if granted and limits.in_flight:
            self._hold(in_flight, lease)
        reason = reason.decode() if isinstance(reason, bytes) else str(reason)
        return bool(granted), int(wait_ms), reason

    # -- cool-down -----------------------------------------------------------------------------
    def cool_down(self, key: ProviderKey, seconds: float) -> None:
        """Nobody sends to ``key`` for ``seconds`` (at least 1 ms), in any process."""
        if not self.limits(key).any:
            return
        self.fallback.cool_down(key, seconds)
        try:
            self._cool_down(keys=[self.keys(key)[2]], args=[max(1, int(seconds * 1000))])
        except self._errors as exc:
            self._failed("sharing a 429's cool-down", exc)

    # -- leases ---------------------------------------------------------------------------------
    def _hold(self, in_flight: str, lease: str) -> None:
        with self._lock:
            self._held.setdefault(in_flight, set()).add(lease)
            if self._renewer is None or not self._renewer.is_alive():
                self._renewer = threading.Thread(
                    target=self._renew_forever, name="provider-limit-leases", daemon=True
                )
                self._renewer.start()

    def _unhold(self, in_flight: str, lease: str) -> None:
        with self._lock:
            leases = self._held.get(in_flight)
            if leases is not None:
                leases.discard(lease)
                if not leases:
                    del self._held[in_flight]

    def _renew_forever(self) -> None:
        while True:
            time.sleep(self.lease_ms / 3000.0)
            with self._lock:
                held = {key: list(leases) for key, leases in self._held.items()}
            for in_flight, leases in held.items():
                try:
                    self._renew(keys=[in_flight], args=[self.lease_ms, *leases])
                except self._errors as exc:
                    self._failed("renewing held slots", exc)

    def _failed(self, action: str, exc: BaseException) -> None:
        if not self._down:
            logger.warning(
                "provider rate limits in Redis: %s failed (%s: %s); this process keeps its "
                "share of the limits by itself until Redis answers",
                action,
                type(exc).__name__,
                exc,
            )
        self._down = True


class _Held:
    """A granted slot: its lease (requests in flight) and its window entry (per minute)."""

    def __init__(
        self,
        limiter: RedisProviderLimiter,
        key: ProviderKey,
        lease: str,
        tokens: int,
        counted: bool,
        windowed: bool,
        local: bool = False,
    ):
        self.limiter, self.key, self.lease, self.tokens = limiter, key, lease, tokens
        self.counted, self.windowed, self.local = counted, windowed, local

    def settle(self, tokens: int) -> None:
        """The request used ``tokens`` tokens: its window entry counts those from now on."""
        tokens = max(0, int(tokens))
        if not self.windowed or tokens == self.tokens:
            return
        if self.local:
            self.limiter.fallback.settle(self.key, self.lease, tokens)
            self.tokens = tokens
            return
        window = self.limiter.keys(self.key)[1]
        try:
            self.limiter._settle(keys=[window], args=[self.lease, self.tokens, tokens])
            self.tokens = tokens
        except self.limiter._errors as exc:
            self.limiter._failed("settling a request's tokens", exc)

    def release(self) -> None:
        """Free the slot (synchronously: a cancelled call still gives it back at once)."""
        if not self.counted:
            return
        self.counted = False
        if self.local:
            self.limiter.fallback.release(self.key)
            return
        in_flight = self.limiter.keys(self.key)[0]
        self.limiter._unhold(in_flight, self.lease)
        try:
            self.limiter._client.zrem(in_flight, self.lease)
        except self.limiter._errors as exc:  # the lease expires by itself
            self.limiter._failed("freeing a slot", exc)


class LocalFallback:
    """The limits kept by one process alone, while Redis cannot be asked.

    Each limit is scaled by ``share`` (at least 1): requests in flight, requests and tokens in
    the last minute, and a 429's cool-down. Answers like the Redis script: (granted, how many
    milliseconds until room comes back or 0 when unknown, what holds the request back).
    """

    def __init__(self, share: float = 1.0):
        self.share = min(1.0, max(0.0, float(share))) or 1.0
        self._lock = threading.Lock()
        self._in_flight: dict[ProviderKey, int] = {}
        self._window: dict[ProviderKey, dict[str, tuple[float, int]]] = {}
        self._cool: dict[ProviderKey, float] = {}

    def _cap(self, limit: int | None) -> int:
        return max(1, int(limit * self.share)) if limit else 0

    def ask(
        self, key: ProviderKey, limits: Limits, lease: str, tokens: int
    ) -> tuple[bool, int, str]:
        now = time.monotonic()
        with self._lock:
            cooled = self._cool.get(key, 0.0) - now
            if cooled > 0:
                return False, int(cooled * 1000) + 1, "a 429's cool-down (Redis away)"
            in_flight = self._cap(limits.in_flight)
            if in_flight and self._in_flight.get(key, 0) >= in_flight:
                return False, 0, f"{in_flight} requests in flight from this process (Redis away)"
            window = self._window.setdefault(key, {})
            for old in [k for k, (at, _) in window.items() if now - at >= WINDOW_MS / 1000]:
                del window[old]
            leaving = (
                int(
                    (min((at for at, _ in window.values()), default=now) + WINDOW_MS / 1000 - now)
                    * 1000
                )
                + 1
            )
            rpm = self._cap(limits.rpm)
            if rpm and len(window) >= rpm:
                return False, leaving, f"{rpm} requests a minute from this process (Redis away)"
            tpm = self._cap(limits.tpm)
            if tpm and window and sum(t for _, t in window.values()) + tokens > tpm:
                return False, leaving, f"{tpm} tokens a minute from this process (Redis away)"
            if in_flight:
                self._in_flight[key] = self._in_flight.get(key, 0) + 1
            if rpm or tpm:
                window[lease] = (now, tokens)
            return True, 0, ""

    def settle(self, key: ProviderKey, lease: str, tokens: int) -> None:
        with self._lock:
            window = self._window.get(key, {})
            if lease in window:
                window[lease] = (window[lease][0], tokens)

    def release(self, key: ProviderKey) -> None:
        with self._lock:
            if self._in_flight.get(key, 0) > 0:
                self._in_flight[key] -= 1

    def cool_down(self, key: ProviderKey, seconds: float) -> None:
        with self._lock:
            until = time.monotonic() + max(0.001, float(seconds))
            self._cool[key] = max(self._cool.get(key, 0.0), until)
