"""LanguageModel: parsing, retries, parse-retry temperature, usage, cache, unreachable errors."""

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import Answer
from training.engine.language_models.errors import LanguageModelError, LanguageModelUnreachable
from training.engine.language_models.parsing import OutputParseError, extract_json, parse_output
from training.engine.testing import FakeLanguageModel

MESSAGES = [{"role": "user", "content": '{"query": "q"}'}]


def test_forgiving_extraction():
    assert extract_json('```json\n{"answer": "4"}\n```') == {"answer": "4"}
    assert extract_json('Sure! {"answer": "a\nb"} hope it helps') == {"answer": "a\nb"}
    assert extract_json('{"answer": "x",}') == {"answer": "x"}
    with pytest.raises(OutputParseError):
        extract_json("no json here")


def test_strict_schema():
    assert parse_output('{"answer": "4"}', Answer).answer == "4"
    with pytest.raises(OutputParseError, match="answer"):
        parse_output('{"answer": 4}', Answer)
    with pytest.raises(OutputParseError):
        parse_output('{"answer": "4", "extra": 1}', Answer)
    with pytest.raises(OutputParseError):
        parse_output("[1, 2]", Answer)


async def test_transient_errors_are_retried_and_counted():
    lm = FakeLanguageModel(
        responder=lambda r: {"answer": "ok"}, failure_rate=0.3, seed=1, retries=10
    )
    with synalinks.usage.track() as usage:
        results = [await lm(MESSAGES, Answer) for _ in range(20)]
    assert all(r.answer == "ok" for r in results)
    assert usage.failures > 0 and usage.calls == 20 + usage.failures


async def test_non_transient_error_is_not_retried():
    lm = FakeLanguageModel(failure_rate=1.0, failure="fatal", retries=3)
    with synalinks.usage.track() as usage, pytest.raises(LanguageModelError, match="fake/scripted"):
        await lm(MESSAGES, Answer)
    assert usage.calls == 1


async def test_parse_failure_at_temperature_zero_retries_at_small_temperature():
    seen = []

    def respond(request):
        seen.append(request.temperature)
        return "not json" if request.temperature == 0.0 else {"answer": "ok"}

    lm = FakeLanguageModel(responder=respond)
    assert (await lm(MESSAGES, Answer)).answer == "ok"
    assert seen == [0.0, lm.parse_retry_temperature] and lm.parse_retry_temperature > 0


async def test_parse_failure_twice_is_an_error():
    lm = FakeLanguageModel(responder=lambda r: "garbage")
    with pytest.raises(LanguageModelError, match="not JSON"):
        await lm(MESSAGES, Answer)
    assert lm.calls == 2


async def test_unreachable_names_model_and_api_base():
    lm = FakeLanguageModel(
        failure_rate=1.0, failure="unreachable", retries=1, api_base="http://10.0.0.1:9"
    )
    with pytest.raises(LanguageModelUnreachable, match=r"fake/scripted.*http://10\.0\.0\.1:9"):
        await lm(MESSAGES, Answer)


async def test_real_litellm_unreachable_endpoint():
    lm = synalinks.LanguageModel(
        model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", retries=0, timeout=5
    )
    import os

    os.environ.setdefault("OPENAI_API_KEY", "sk-test-not-a-key")
    with pytest.raises(LanguageModelUnreachable, match=r"openai/gpt-4o-mini.*127\.0\.0\.1:9"):
        await lm(MESSAGES, Answer)


async def test_usage_records_tokens_cost_latency():
    lm = FakeLanguageModel(prompt_tokens=7, completion_tokens=3, cost_per_call=0.01)
    with synalinks.usage.track() as outer:
        with synalinks.usage.track() as inner:
            await lm(MESSAGES, Answer)
        await lm(MESSAGES, Answer)
    assert inner.calls == 1 and outer.calls == 2
    assert outer.prompt_tokens == 14 and outer.completion_tokens == 6 and outer.total_tokens == 20
    assert outer.cost == pytest.approx(0.02)
    assert outer.to_dict()["by_model"]["fake/scripted"]["calls"] == 2


async def test_response_cache_makes_repeat_calls_free(tmp_path):
    lm = FakeLanguageModel(responder=lambda r: {"answer": "cached"}, cache=f"disk:{tmp_path}")
    with synalinks.usage.track() as usage:
        first = await lm(MESSAGES, Answer)
        second = await lm(MESSAGES, Answer)
    assert first == second and lm.calls == 1
    assert usage.calls == 1 and usage.cache_hits == 1
    # a new LanguageModel object on the same cache directory (a new run) is also free
    again = FakeLanguageModel(responder=lambda r: {"answer": "other"}, cache=f"disk:{tmp_path}")
    assert (await again(MESSAGES, Answer)).answer == "cached" and again.calls == 0


async def test_cache_ignores_non_deterministic_calls():
    lm = FakeLanguageModel(responder=lambda r: {"answer": "x"}, cache="memory", temperature=0.7)
    await lm(MESSAGES, Answer)
    await lm(MESSAGES, Answer)
    assert lm.calls == 2


async def test_semaphore_limits_concurrency():
    import asyncio

    active = {"now": 0, "max": 0}

    async def respond(request):
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        await asyncio.sleep(0.01)  # the provider's latency: the calls overlap
        active["now"] -= 1
        return {"answer": "x"}

    lm = FakeLanguageModel(responder=respond, max_concurrency=3)
    await asyncio.gather(*(lm(MESSAGES, Answer) for _ in range(12)))
    assert active["max"] == 3


def test_schema_in_prompt_when_provider_lacks_response_format():
    from training.engine.language_models.output_format import output_note, with_output_note

    lm = synalinks.LanguageModel(model="ollama/llama3")
    assert lm.supports_response_schema() is False
    note = output_note(Answer.get_schema(), with_schema=not lm.supports_response_schema())
    messages = with_output_note([{"role": "system", "content": "S"}], note)
    assert messages[0]["content"].startswith("S") and '"answer"' in messages[0]["content"]


async def test_embedding_model_batches():
    em = synalinks.testing.FakeEmbeddingModel(batch_size=4)
    with synalinks.usage.track() as usage:
        vectors = await em([f"text {i}" for i in range(10)])
    assert len(vectors) == 10 and em.calls == 3 and usage.embedding_calls == 3
    same = await em(["text 1"])
    assert same[0] == vectors[1]
