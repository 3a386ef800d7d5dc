"""A call given up by its caller (a run cancelled or paused mid-call) counts as a call made,
never as a failed one, so usage says what the traces and the error panel say. Against a real
HTTP server that takes its time to answer."""

from __future__ import annotations

import asyncio

import pydantic

import training.engine as synalinks
from tests.openai_server import OpenAIServer


class Answer(pydantic.BaseModel):
    team: str


async def test_a_cancelled_call_is_counted_but_not_failed():
    with OpenAIServer(limit=4, latency=5.0, content='{"team": "money"}') as server:
        lm = synalinks.LanguageModel(
            model="openai/slow", api_base=server.api_base, api_key="k", retries=0, timeout=30
        )
        with synalinks.usage.track() as usage:
            call = asyncio.create_task(lm([{"role": "user", "content": "hi"}], Answer))
            assert await asyncio.to_thread(server.arrived.wait, 10)  # the request is made
            call.cancel()
            try:
                await call
            except asyncio.CancelledError:
                pass
        assert usage.calls == 1
        assert usage.failures == 0
        assert usage.by_role["prediction"]["failures"] == 0
