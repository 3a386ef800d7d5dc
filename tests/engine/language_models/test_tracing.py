"""LM call traces: what a recorder sees of each call (roles, candidates, examples, failures,
cache and memo hits), its bounds, and that secrets never reach a record."""

import json

import numpy as np
import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import (
    TRUTH,
    UNPARSABLE,
    Query,
    build_program,
    dataset,
    oracle_lm,
    unparsable_lm,
)
from tests.engine.optimizers.test_omega import compiled, make_omega, mutation_lm
from training.engine import tracing
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel


async def test_a_prediction_is_traced_with_messages_response_parsed_output_and_usage():
    program = await build_program(oracle_lm(prompt_tokens=12, completion_tokens=3))
    x, _ = dataset(2)
    with synalinks.tracing.record() as recorder:
        await program.predict(x, batch_size=2)
    assert [t.seq for t in recorder.records] == [1, 2]
    by_example = {t.example_index: t for t in recorder.records}
    trace = by_example[1]
    assert trace.role == "prediction" and trace.kind == "completion"
    assert trace.model == "fake/scripted"
    assert trace.messages[0]["role"] == "system"
    assert json.loads(trace.messages[-1]["content"]) == {"query": "Capital of France?"}
    assert json.loads(trace.response) == {"answer": "Paris"}
    assert json.loads(trace.parsed) == {"answer": "Paris"}
    assert (trace.prompt_tokens, trace.completion_tokens, trace.attempts) == (12, 3, 1)
    assert not trace.failed and trace.error is None and not trace.cache_hit


async def test_nothing_is_recorded_outside_a_recorder_and_records_stop_with_it():
    program = await build_program(oracle_lm())
    x, _ = dataset(1)
    await program.predict(x)
    with synalinks.tracing.record() as recorder:
        pass
    await program.predict(x)
    assert recorder.records == [] and recorder.calls == 0


async def test_an_unparsable_answer_is_traced_with_its_raw_text_and_parse_error():
    program = await build_program(unparsable_lm())
    x, _ = dataset(1)
    with synalinks.tracing.record() as recorder:
        predictions = await program.predict(x)
    assert predictions[0] is None
    # deterministic: the parse is retried once at a small temperature; both are traced
    assert len(recorder.records) == 2
    for trace in recorder.records:
        assert trace.failed and trace.response == UNPARSABLE
        assert trace.error.startswith("unparsable output:") and trace.parsed is None


async def test_a_failed_request_is_traced_with_the_error_and_its_attempts():
    lm = FakeLanguageModel(failure_rate=1.0, failure="error", retries=2)
    program = await build_program(lm)
    x, _ = dataset(1)
    with synalinks.tracing.record() as recorder:
        await program.predict(x)
    [trace] = recorder.records
    assert trace.failed and trace.response is None and trace.attempts == 3
    assert "simulated transient failure" in trace.error


async def test_cache_and_memo_hits_are_traced_as_such():
    lm = oracle_lm(cache="memory")
    program = await build_program(lm)
    x, _ = dataset(1)
    await program.predict(x)
    with synalinks.tracing.record() as recorder:
        await program.predict(x)
    [cached] = recorder.records
    assert cached.cache_hit and cached.attempts == 0 and not cached.failed

    program = await build_program(oracle_lm())
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]))
    x, y = dataset(4)
    with synalinks.tracing.record() as recorder:
        await program.fit(x=x, y=y, epochs=2, batch_size=4, shuffle=False, seed=1)
    memo = [t for t in recorder.records if t.memo_hit]
    assert memo, "re-scoring unchanged variables must be answered by the memo"
    assert all(t.kind == "memo" and t.attempts == 0 for t in memo)
    assert json.loads(memo[0].response)["answer"] in TRUTH.values()


async def test_fit_traces_name_the_split_example_epoch_and_scored_candidate():
    program = await build_program(oracle_lm())
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]))
    x, y = dataset(6)
    with synalinks.tracing.record() as recorder:
        await program.fit(x=x, y=y, epochs=1, batch_size=2, validation_split=0.5, seed=3)
    train = [t for t in recorder.records if t.split == "train"]
    validation = [t for t in recorder.records if t.split == "validation"]
    assert sorted(t.example_index for t in train) == [0, 1, 2]
    for trace in train:  # the index is the example's position in x, whatever the shuffle
        asked = json.loads(trace.messages[-1]["content"])["query"]
        assert asked == x[trace.example_index].query
        assert trace.epoch == 0 and trace.role == "prediction"
    scored = [t for t in validation if t.candidate_id == "c1"]
    assert sorted(t.example_index for t in scored) == [0, 1, 2]


async def test_omega_calls_are_traced_as_mutation_and_embedding():
    program = await compiled(make_omega(lm=mutation_lm(), em=FakeEmbeddingModel()))
    x, y = dataset(4)
    with synalinks.tracing.record() as recorder:
        await program.fit(x=x, y=y, epochs=2, batch_size=2, validation_split=0.5, seed=0)
    roles = {t.role for t in recorder.records}
    assert {"prediction", "mutation", "embedding"} <= roles
    mutation = next(t for t in recorder.records if t.role == "mutation")
    assert mutation.messages and json.loads(mutation.parsed)["instructions"]
    embedding = next(t for t in recorder.records if t.role == "embedding")
    assert embedding.kind == "embedding" and embedding.response.endswith("dimensions")
    assert all(m["role"] == "input" for m in embedding.messages)


async def judged_program():
    """A program on the oracle LM rewarded by an LM judge (a fake that finds every answer
    fine): each example its evaluation scores makes one judge call."""
    judge_lm = FakeLanguageModel(responder=lambda request: {"critique": "fine", "score": 1.0})
    program = await build_program(oracle_lm())
    program.compile(reward=synalinks.rewards.LMAsJudge(language_model=judge_lm))
    return program


async def test_judge_calls_are_traced_with_the_judge_role():
    program = await judged_program()
    x, y = dataset(2)
    with synalinks.tracing.record() as recorder:
        await program.evaluate(x, y)
    roles = sorted(t.role for t in recorder.records)
    assert roles == ["judge", "judge", "prediction", "prediction"]


async def test_a_recorder_keeps_max_calls_and_counts_the_rest():
    program = await build_program(oracle_lm())
    x, _ = dataset(5)
    seen = []
    with synalinks.tracing.record(max_calls=3, on_record=seen.append, keep=False) as recorder:
        await program.predict(x)
    assert recorder.records == [] and len(seen) == 3
    assert (recorder.calls, recorder.dropped) == (5, 2)


async def test_every_text_is_cut_to_max_chars():
    long_answer = "x" * 500
    lm = FakeLanguageModel(responder=lambda request: {"answer": long_answer})
    program = await build_program(lm)
    x = np.array([Query(query="q" * 300)], dtype="object")
    with synalinks.tracing.record(max_chars=50) as recorder:
        await program.predict(x)
    [trace] = recorder.records
    for text in [trace.response, trace.parsed, *(m["content"] for m in trace.messages)]:
        assert len(text) <= 50 + len("… [99999 more characters]")
    assert trace.response.endswith("more characters]")


SECRETS = [
    "sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "Authorization: Bearer abcdef1234567890abcdef",
    'api_key="AIzaSyA1234567890abcdefghijklmnopqrstu"',
    "x-api-key: 0123456789abcdef",
    "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
]


@pytest.mark.parametrize("secret", SECRETS)
async def test_secrets_in_prompts_and_answers_are_redacted(secret):
    lm = FakeLanguageModel(responder=lambda request: {"answer": f"here: {secret}"})
    program = await build_program(lm)
    x = np.array([Query(query=f"my key is {secret}")], dtype="object")
    with synalinks.tracing.record() as recorder:
        await program.predict(x)
    [trace] = recorder.records
    stored = json.dumps(trace.to_dict())
    assert tracing.REDACTED in trace.response and tracing.REDACTED in trace.messages[-1]["content"]
    for part in ("abcdefghijklmnopqrstuvwxyz", "abcdef1234567890", "AIzaSy", "0123456789abcdef"):
        assert part not in stored


async def test_messages_keep_only_role_and_content():
    recorder = tracing.TraceRecorder()
    recorder.add(
        tracing.CallTrace(
            messages=[{"role": "user", "content": "hi", "api_key": "sk-secret", "headers": {}}]
        )
    )
    assert recorder.records[0].messages == [{"role": "user", "content": "hi"}]


def test_trace_context_checks_its_fields():
    with pytest.raises(TypeError, match="unknown fields"):
        with tracing.trace_context(api_key="x"):
            pass
    with pytest.raises(ValueError, match="expected one of"):
        with tracing.trace_context(role="mystery"):
            pass
    with tracing.trace_context(role="judge", example_index=2):
        with tracing.trace_context(example_index=None, candidate_id="c4"):
            assert tracing.current_context() == {
                "role": "judge",
                "example_index": 2,
                "candidate_id": "c4",
            }
    assert tracing.current_context() == {}


async def test_judge_calls_name_the_example_they_judge():
    program = await judged_program()
    x, y = dataset(5)
    with synalinks.tracing.record() as recorder:
        await program.evaluate(x, y, batch_size=2)
    judged = sorted(t.example_index for t in recorder.records if t.role == "judge")
    assert judged == [0, 1, 2, 3, 4]  # over three batches: positions in the split


async def test_omega_mutations_name_the_candidate_they_start_from():
    program = await compiled(make_omega(lm=mutation_lm(), em=FakeEmbeddingModel()))
    x, y = dataset(4)
    with synalinks.tracing.record() as recorder:
        await program.fit(x=x, y=y, epochs=2, batch_size=2, validation_split=0.5, seed=0)
    variable = program.trainable_variables[0]
    known = {candidate["id"] for candidate in variable.candidates}
    evolving = [t for t in recorder.records if t.role in ("mutation", "crossover")]
    assert evolving and all(t.candidate_id in known for t in evolving)


async def test_records_are_cleaned_when_read_with_the_context_of_their_call(monkeypatch):
    """The recording path keeps the call's own objects; reading a record finishes it: the
    context as it was at the call, texts redacted and cut, the raw objects let go."""
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789-secret")
    lm = FakeLanguageModel(responder=lambda request: {"answer": "tok-0123456789-secret " * 20})
    program = await build_program(lm)
    x = np.array([Query(query="q")], dtype="object")
    with synalinks.tracing.record(max_chars=30) as recorder:
        with tracing.trace_context(split="test", phase="before"):
            await program.predict(x)
    [trace] = recorder.records
    assert trace.__dict__["_pending"]  # nothing cleaned yet
    assert (trace.role, trace.split, trace.phase, trace.example_index) == (
        "prediction",
        "test",
        "before",
        0,
    )
    assert not trace.__dict__["_pending"] and trace.__dict__["_context"] is None
    assert "tok-0123456789" not in trace.response and tracing.REDACTED in trace.response
    assert trace.response.endswith("more characters]")
    assert "tok-0123456789" not in json.dumps(trace.to_dict())
    assert trace == trace  # a dataclass still: compared and turned to a dict field by field
    assert set(trace.to_dict()) == set(tracing.CallTrace.__dataclass_fields__)


def test_an_unknown_field_is_refused_at_once():
    with tracing.record() as recorder:
        with pytest.raises(TypeError, match="no fields"):
            tracing.emit(kind="completion", model="m", colour="blue")
    assert recorder.records == []
