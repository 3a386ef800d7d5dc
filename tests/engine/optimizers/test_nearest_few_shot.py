"""NearestFewShot: a pool of embedded training examples, the k nearest put in each prompt.

The task LM here is a scripted model of "a small model copies its nearest demonstration":
it answers the label of the last example turn before the input (the nearest one), or
``bug`` without examples. The fake embeddings are hashed bags of words (cosine ~ shared
words), so the nearest example is the one sharing most words with the input."""

from __future__ import annotations

import base64
import json
from typing import Literal

import numpy as np
import pytest

import training.engine as synalinks
from tests.engine.helpers_events import EventRecorder
from training.engine.bounds import ParameterError
from training.engine.modules import example_retrieval as retrieval
from training.engine.optimizers import NearestFewShot
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel
from training.engine.variables import VariableError
from training.forecasting import forecast


class Message(synalinks.DataModel):
    message: str


class Route(synalinks.DataModel):
    team: Literal["money", "bug", "box"]


TRAIN = [
    ("refund the double charge", "money"),
    ("my invoice charge is wrong", "money"),
    ("payment refund please", "money"),
    ("invoice payment failed", "money"),
    ("app crash on login", "bug"),
    ("error screen after update", "bug"),
    ("login error again", "bug"),
    ("screen crash at start", "bug"),
    ("package delivery late", "box"),
    ("tracking number for parcel", "box"),
    ("parcel delivery missing", "box"),
    ("package tracking broken", "box"),
]
TEST = [
    ("charge refund needed", "money"),
    ("invoice payment question", "money"),
    ("crash and error", "bug"),
    ("login screen frozen", "bug"),
    ("delivery of my package", "box"),
    ("parcel tracking", "box"),
]


def arrays(rows):
    x = np.array([Message(message=m) for m, _ in rows], dtype="object")
    y = np.array([Route(team=t) for _, t in rows], dtype="object")
    return x, y


def copier(seen=None):
    """Answers the team of the nearest example (the last one shown), else ``bug``."""

    def respond(request):
        if seen is not None:
            seen.append(
                (request.inputs["message"], [e["inputs"]["message"] for e in request.examples])
            )
        shown = [m for m in request.messages[1:-1] if m["role"] == "assistant"]
        if shown:
            return json.loads(shown[-1]["content"])
        return {"team": "bug"}

    return FakeLanguageModel(responder=respond)


async def program_on(lm, optimizer, instructions="Route the message."):
    inputs = synalinks.Input(data_model=Message)
    outputs = await synalinks.Generator(
        data_model=Route, language_model=lm, instructions=instructions, name="router"
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="routing")
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["team"]), optimizer=optimizer)
    return program


async def test_fit_keeps_a_pool_that_retrieves_the_nearest_examples_and_raises_the_reward():
    em = FakeEmbeddingModel()
    program = await program_on(copier(), NearestFewShot(embedding_model=em, k=3, seed=0))
    x, y = arrays(TRAIN)
    x_test, y_test = arrays(TEST)
    before = await program.evaluate(x_test, y_test)
    recorder = EventRecorder()
    await program.fit(x, y, epochs=2, batch_size=4, seed=0, callbacks=[recorder])
    after = await program.evaluate(x_test, y_test)
    assert before["reward"] == pytest.approx(2 / 6)  # "bug" for everything
    assert after["reward"] == 1.0
    state = program.trainable_variables[0].value
    assert state["instructions"] == "Route the message."  # kept as it was
    settings = state["retrieval"]
    assert settings["k"] == 3 and settings["embedding_model"] == "fake/embedding"
    assert len(settings["pool"]) == len(TRAIN)
    # the pool is sorted by input (the same data give the same pool), each with its vector
    messages = [e["inputs"]["message"] for e in settings["pool"]]
    assert messages == sorted(messages)
    vector = retrieval.decode_vector(settings["pool"][0]["vector"])
    assert vector.shape == (64,) and np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-3)
    # one candidate (the pool) besides the seed: the second epoch proposes the same pool
    scored = [e for e in recorder.of("candidate") if e["status"] == "scored"]
    assert [e["operation"] for e in scored] == ["seed", "few_shot"]
    best = [e for e in recorder.of("candidate") if e["status"] == "best"]
    assert best[0]["candidate_id"] == scored[1]["candidate_id"]
    summary = program.summary(print_fn=None)
    assert "3 nearest of 12 pooled example(s) by fake/embedding" in summary


async def test_the_prompt_shows_the_k_nearest_nearest_last_and_a_vote_hint():
    em = FakeEmbeddingModel()
    lm = copier()
    lm.record_requests = True
    program = await program_on(lm, NearestFewShot(embedding_model=em, k=2, seed=0))
    x, y = arrays(TRAIN)
    await program.fit(x, y, epochs=1, batch_size=4, seed=0)
    lm.requests.clear()
    await program.predict(np.array([Message(message="parcel tracking")], dtype="object"))
    messages = lm.requests[0].messages
    shown = [json.loads(m["content"]) for m in messages[1:-1] if m["role"] == "user"]
    # both share two words with the input; the one sharing the most ("tracking number for
    # parcel" has four words, "package tracking broken" one word fewer) is shown last
    assert {s["message"] for s in shown} == {
        "tracking number for parcel",
        "package tracking broken",
    }
    assert json.loads(messages[-1]["content"]) == {"message": "parcel tracking"}
    assert 'answered {"team": "box"} 2 time(s) out of 2' in messages[0]["content"]


async def test_the_own_row_is_never_retrieved_while_fitting_only_after():
    seen = []
    program = await program_on(
        copier(seen), NearestFewShot(embedding_model=FakeEmbeddingModel(), k=3, seed=0)
    )
    x, y = arrays(TRAIN)
    await program.fit(x, y, epochs=2, batch_size=4, seed=0)  # scored on the training rows
    with_examples = [(query, shown) for query, shown in seen if shown]
    assert len(with_examples) >= len(TRAIN)  # the pool was scored on every training row
    assert all(query not in shown for query, shown in with_examples)
    seen.clear()
    await program.predict(x[:1])  # after fit: the same text may be retrieved (it is nearest)
    assert seen[0][1][-1] == seen[0][0]


async def test_training_inputs_are_embedded_once_per_fit_and_each_query_once():
    em = FakeEmbeddingModel(batch_size=5)
    program = await program_on(copier(), NearestFewShot(embedding_model=em, k=3, seed=0))
    x, y = arrays(TRAIN)
    with synalinks.usage.track() as usage:
        await program.fit(x, y, epochs=3, batch_size=4, seed=0)
    # the pool: 12 texts in one call of the model (3 requests of 5), once for 3 epochs;
    # then one request per distinct input scored with the pool (12 training rows)
    assert program.optimizer.texts_embedded == 12 and program.optimizer.embedding_requests == 3
    assert usage.embedding_calls == 3 + 12
    x_test, _ = arrays(TEST)
    with synalinks.usage.track() as usage:
        first = await program.predict(x_test)
        again = await program.predict(x_test)
    assert usage.embedding_calls == len(TEST)  # the second pass: remembered query vectors
    assert [p.get_json() for p in first] == [p.get_json() for p in again]


async def test_saved_and_loaded_program_predicts_the_same(tmp_path):
    em = FakeEmbeddingModel()
    program = await program_on(copier(), NearestFewShot(embedding_model=em, k=3, seed=0))
    x, y = arrays(TRAIN)
    x_test, y_test = arrays(TEST)
    await program.fit(x, y, epochs=1, batch_size=4, seed=0)
    path = tmp_path / "program.json"
    program.save(str(path))
    document = json.loads(path.read_text())  # plain JSON
    assert "retrieval" in json.dumps(document)
    loaded = synalinks.Program.load(str(path))
    assert isinstance(loaded.optimizer, NearestFewShot) and loaded.optimizer.k == 3
    generator = loaded.modules[0]
    assert isinstance(generator.embedding_model, FakeEmbeddingModel)  # saved with the module
    generator.language_model = copier()  # a scripted responder is code: not in the file
    before = [p.get_json() for p in await program.predict(x_test)]
    assert [p.get_json() for p in await loaded.predict(x_test)] == before
    assert (await loaded.evaluate(x_test, y_test))["reward"] == 1.0


async def test_variables_loaded_into_a_program_without_the_embedding_model_say_what_to_do(
    tmp_path,
):
    program = await program_on(
        copier(), NearestFewShot(embedding_model=FakeEmbeddingModel(), seed=0)
    )
    x, y = arrays(TRAIN)
    await program.fit(x, y, epochs=1, batch_size=4, seed=0)
    path = tmp_path / "variables.json"
    program.save_variables(str(path))
    fresh = await program_on(copier(), None)
    fresh.load_variables(str(path))
    generator = fresh.modules[0]
    with pytest.raises(retrieval.RetrievalError, match="give it embedding_model="):
        await generator.retrieve({"message": "parcel tracking"})
    generator.embedding_model = FakeEmbeddingModel()
    examples, _ = await generator.retrieve({"message": "parcel tracking"})
    assert examples[0]["inputs"] == {"message": "tracking number for parcel"}


def test_nearest_ties_go_to_the_earlier_row_and_exclusions_are_never_returned():
    matrix = np.array([[1, 0], [1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
    assert retrieval.nearest_indices(matrix, np.array([1.0, 0.0]), 3) == [0, 1, 3]
    assert retrieval.nearest_indices(matrix, np.array([2.0, 0.0]), 2, exclude=[0]) == [1, 3]
    with pytest.raises(retrieval.RetrievalError, match="another embedding model"):
        retrieval.nearest_indices(matrix, np.array([1.0, 0.0, 0.0]), 1)


def test_vectors_are_base64_float16_and_malformed_ones_are_refused():
    text = retrieval.encode_vector([3.0, 4.0])
    assert np.allclose(retrieval.decode_vector(text), [0.6, 0.8], atol=1e-3)
    assert len(text) == 8  # 2 dimensions x 2 bytes, base64
    for bad in (
        "not base64!",
        "AA==",  # one byte: half a float16
        "A" * (retrieval.MAX_VECTOR_CHARS + 4),
    ):
        with pytest.raises(retrieval.RetrievalError):
            retrieval.decode_vector(bad)
    with pytest.raises(retrieval.RetrievalError, match="dimensions"):
        retrieval.encode_vector([0.1] * (retrieval.MAX_VECTOR_DIMENSIONS + 1))
    with pytest.raises(retrieval.RetrievalError, match="different sizes"):
        retrieval.pool_matrix(
            [{"vector": retrieval.encode_vector([1, 0])}, {"vector": retrieval.encode_vector([1])}]
        )


async def test_a_pool_over_its_bounds_does_not_fit_the_state():
    program = await program_on(copier(), None)
    state = program.trainable_variables[0]
    entry = {
        "inputs": {"message": "m"},
        "outputs": {"team": "box"},
        "vector": retrieval.encode_vector([1.0]),
    }
    too_many = {"k": 1, "pool": [entry] * (retrieval.MAX_POOL_SIZE + 1)}
    with pytest.raises(VariableError, match="retrieval/pool"):
        state.assign({"instructions": "", "examples": [], "retrieval": too_many})
    with pytest.raises(VariableError, match="retrieval/k"):
        state.assign({"instructions": "", "examples": [], "retrieval": {"k": 0, "pool": [entry]}})


def test_parameters_are_checked_against_their_bounds():
    em = FakeEmbeddingModel()
    with pytest.raises(ParameterError, match="k must be a whole number between 1 and 32"):
        NearestFewShot(embedding_model=em, k=0)
    with pytest.raises(ParameterError, match="pool_size"):
        NearestFewShot(embedding_model=em, pool_size=retrieval.MAX_POOL_SIZE + 1)
    with pytest.raises(ValueError, match="needs embedding_model"):
        NearestFewShot()
    assert set(NearestFewShot.PARAMETERS) == {"embedding_model", "k", "pool_size", "vote"}


async def test_a_pool_bigger_than_pool_size_keeps_every_label():
    optimizer = NearestFewShot(embedding_model=FakeEmbeddingModel(), k=1, pool_size=3, seed=0)
    program = await program_on(copier(), optimizer)
    x, y = arrays(TRAIN)
    await program.fit(x, y, epochs=1, batch_size=4, seed=0)
    [proposed] = [c for c in program.trainable_variables[0].candidates if c["operation"] != "seed"]
    pool = proposed["value"]["retrieval"]["pool"]
    assert sorted(e["outputs"]["team"] for e in pool) == ["box", "bug", "money"]


@pytest.mark.parametrize("validation_split", [0.0, 0.25])
async def test_the_forecast_counts_its_lm_and_embedding_calls(validation_split):
    em = FakeEmbeddingModel(batch_size=5)
    program = await program_on(copier(), NearestFewShot(embedding_model=em, k=3, seed=0))
    x, y = arrays(TRAIN)
    x_test, y_test = arrays(TEST)
    with synalinks.usage.track() as usage:
        await program.evaluate(x_test, y_test)
        history = await program.fit(
            x, y, epochs=2, batch_size=4, seed=0, validation_split=validation_split
        )
        await program.evaluate(x_test, y_test)
    changed = int("retrieval" in program.trainable_variables[0].value)
    shape = forecast.RunShape(
        train_inputs=[{"message": m} for m, _ in TRAIN],
        test_size=len(TEST),
        epochs=2,
        batch_size=4,
        validation_split=validation_split,
        optimizer="NearestFewShot",
        embedding_batch_size=5,
    )
    rule = forecast.count_calls(shape)
    assert rule.total.low <= usage.calls <= rule.total.high
    assert rule.embeddings.low <= usage.embedding_calls <= rule.embeddings.high
    known = forecast.count_calls(shape, scored=1, best_changes=changed)
    assert usage.calls == known.total.low == known.total.high
    assert history.usage["embedding_calls"] == known.embeddings.low  # the fit's part is exact


async def test_omega_after_nearest_few_shot_keeps_the_pool_and_rewrites_only_the_instructions():
    """Combined: the pool from NearestFewShot, instructions from OMEGA (the pool is frozen)."""
    em = FakeEmbeddingModel()
    program = await program_on(copier(), NearestFewShot(embedding_model=em, k=3, seed=0))
    x, y = arrays(TRAIN)
    await program.fit(x, y, epochs=1, batch_size=4, seed=0)
    pool = program.trainable_variables[0].value["retrieval"]
    mutation_lm = FakeLanguageModel(
        responder=lambda request: {
            "thinking": "name the teams",
            "instructions": "Route the message to money, bug or box.",
        }
    )
    mutation_lm.record_requests = True
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["team"]),
        optimizer=synalinks.optimizers.OMEGA(language_model=mutation_lm, embedding_model=em),
    )
    recorder = EventRecorder()
    await program.fit(x, y, epochs=1, batch_size=4, seed=0, callbacks=[recorder])
    assert "retrieval" not in mutation_lm.requests[0].schema["properties"]
    assert "retrieval" not in mutation_lm.requests[0].inputs["current_variable"]
    mutations = [e for e in recorder.of("candidate") if e["operation"] == "mutation"]
    assert mutations and all(e["value"]["retrieval"] == pool for e in mutations)


async def test_another_optimizer_scoring_a_pooled_program_never_retrieves_the_own_row():
    """Re-fitting a pooled program with OMEGA and no validation split scores candidates on
    the training rows the pool holds: each row must not find its own answer there."""
    em = FakeEmbeddingModel()
    seen = []
    program = await program_on(copier(seen), NearestFewShot(embedding_model=em, k=3, seed=0))
    x, y = arrays(TRAIN)
    await program.fit(x, y, epochs=1, batch_size=4, seed=0)
    mutation_lm = FakeLanguageModel(
        responder=lambda request: {
            "thinking": "name the teams",
            "instructions": "Route the message to money, bug or box.",
        }
    )
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["team"]),
        optimizer=synalinks.optimizers.OMEGA(language_model=mutation_lm, embedding_model=em),
    )
    seen.clear()
    recorder = EventRecorder()
    await program.fit(x, y, epochs=1, batch_size=4, seed=0, callbacks=[recorder])
    scored = [e for e in recorder.of("candidate") if e["status"] == "scored"]
    assert [e["operation"] for e in scored][:2] == ["seed", "mutation"]
    with_examples = [(query, shown) for query, shown in seen if shown]
    assert len(with_examples) >= 2 * len(TRAIN)  # the seed and the mutation, every row
    assert all(query not in shown for query, shown in with_examples)


def test_a_loaded_pool_is_compared_by_direction_not_length():
    """A saved document's vectors are untrusted: one long vector must not be the nearest to
    every input, and an all-zero one is refused."""
    unit = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    near = np.array([0.9, 0.1, 0.0, 0.0], dtype=np.float32)
    long_far = np.array([0.0, 0.0, 6e4, 100.0], dtype=np.float32)

    def raw(vector):  # as a crafted document would hold it: not normalised
        return base64.b64encode(vector.astype("<f2").tobytes()).decode("ascii")

    pool = [{"vector": raw(v)} for v in (near, long_far)]
    matrix = retrieval.pool_matrix(pool)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-3)
    assert retrieval.nearest_indices(matrix, unit, 1) == [0]
    zero = [{"vector": raw(np.zeros(4, dtype=np.float32))}]
    with pytest.raises(retrieval.RetrievalError, match="all zeros"):
        retrieval.pool_matrix(zero)
