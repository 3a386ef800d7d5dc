"""The engine's models against a real self-hosted server: llama.cpp's OpenAI-compatible server
on loopback (tests/llama_server.py), reached as ``openai/smollm2`` and ``hosted_vllm/smollm2``
with no key while the environment holds an OpenAI key."""

from __future__ import annotations

import pytest

import training.engine as synalinks
from tests.llama_server import llama_server_fixture  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


class Reply(synalinks.DataModel):
    answer: str


@pytest.mark.parametrize("provider", ["openai", "hosted_vllm"])
async def test_a_structured_answer_from_llama_cpp_server(llama_server, provider, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-held-never-sent")
    monkeypatch.setenv("HOSTED_VLLM_API_KEY", "sk-server-held-never-sent")
    print(f"llama.cpp server up in {llama_server.started_in:.1f} s")
    model = synalinks.LanguageModel(
        model=f"{provider}/smollm2",
        api_base=llama_server.url,
        max_tokens=24,
        timeout=60,
        structured_output="json_object",  # the server holds the answer to the schema
    )
    with synalinks.usage.track() as usage:
        reply = await model([{"role": "user", "content": "Say hello."}], Reply)
    assert isinstance(reply.answer, str) and reply.answer.strip()
    assert usage.calls == 1 and usage.prompt_tokens > 0
    assert llama_server.started_in < 30
