"""LanguageModel calls through litellm to a real local OpenAI-compatible server that answers
429 (with Retry-After) past N requests in flight, limited by the Redis limiter on the test
session's Redis: the shared limit keeps the server at N or fewer, and a 429 one call gets
holds back every call to that provider for its Retry-After.
"""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
import redis

import training.engine as synalinks
from tests.openai_server import OpenAIServer
from training.engine.language_models.limits import rate_limits
from training.engine.language_models.limits.rate_limits import Limits
from training.shared_limits.redis_limiter import RedisProviderLimiter

MESSAGES = [{"role": "user", "content": '{"query": "q"}'}]


class Answer(synalinks.DataModel):
    answer: str


@pytest.fixture
def install_limiter(monkeypatch):
    """Install a Redis limiter with ``in_flight`` slots under a prefix of this test's own."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-local-server-only")
    url = os.environ["REDIS_URL"]
    prefix = f"trainboard:test:limits:{uuid.uuid4().hex}:"
    previous = rate_limits.installed()

    def install(in_flight: int) -> RedisProviderLimiter:
        limiter = RedisProviderLimiter(
            url, lambda key: Limits(in_flight=in_flight), prefix=prefix, max_wait=60
        )
        rate_limits.install(limiter)
        return limiter

    yield install
    rate_limits.install(previous)
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
    client.close()


def model(server: OpenAIServer, **kwargs) -> synalinks.LanguageModel:
    return synalinks.LanguageModel(
        model="openai/test-model", api_base=server.api_base, structured_output="prompt", **kwargs
    )


async def test_two_models_together_never_exceed_the_shared_limit(install_limiter):
    install_limiter(in_flight=3)
    with OpenAIServer(limit=3, latency=0.15, content='{"answer": "ok"}') as server:
        # Two runs' models, each allowing 4 requests of its own at once: 8 > 3.
        first, second = model(server, max_concurrency=4), model(server, max_concurrency=4)
        calls = [lm(MESSAGES, Answer, temperature=0.5) for lm in (first, second) for _ in range(8)]
        answers = await asyncio.gather(*calls)
    assert [answer.answer for answer in answers] == ["ok"] * 16
    assert server.max_in_flight == 3
    assert server.refused == []


async def test_a_429_holds_back_every_call_for_its_retry_after(install_limiter):
    install_limiter(in_flight=4)  # more than the server takes: it answers some with 429
    with OpenAIServer(limit=2, latency=0.3, content='{"answer": "ok"}', retry_after=1.6) as server:
        lm = model(server, max_concurrency=4, retries=8, backoff=0.05)
        answers = await asyncio.gather(*(lm(MESSAGES, Answer, temperature=0.5) for _ in range(6)))
    assert [answer.answer for answer in answers] == ["ok"] * 6
    assert server.refused, "the server never answered 429: the test proves nothing"
    first_429 = server.refused[0]
    # Requests already granted when the 429 came arrive within milliseconds of it; after
    # that nobody sends until the Retry-After (1.6 s, longer than the default 1 s cool-down)
    # is over.
    quiet = [t for t in server.arrivals if first_429 + 0.2 < t < first_429 + 1.5]
    assert quiet == []
    assert max(server.arrivals) > first_429 + 1.5
