"""Program: functional graphs, predict, failures, bad input, summary, save/load."""

import json

import numpy as np
import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import (
    TRUTH,
    Answer,
    Query,
    build_program,
    dataset,
    oracle_lm,
    unparsable_lm,
)
from training.engine.modules import SchemaMismatchError
from training.engine.program import InputMismatchError, VariableMismatchError
from training.engine.saving import UnknownObjectError
from training.engine.testing import FakeLanguageModel


async def test_predict_returns_object_array_in_order():
    program = await build_program(oracle_lm())
    x, y = dataset()
    predictions = await program.predict(x, batch_size=3)
    assert isinstance(predictions, np.ndarray) and predictions.dtype == object
    assert [p.answer for p in predictions] == [t.answer for t in y]


async def test_prompt_contains_instructions_examples_input():
    lm = oracle_lm()
    lm.record_requests = True
    inputs = synalinks.Input(data_model=Query)
    outputs = await synalinks.Generator(
        data_model=Answer,
        language_model=lm,
        instructions="Answer briefly.",
        examples=[(Query(query="What is 1+1?"), Answer(answer="2"))],
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs)
    await program.predict(np.array([Query(query="What is 2+2?")], dtype=object))
    messages = lm.requests[0].messages
    assert "Answer briefly." in messages[0]["content"] and "answer" in messages[0]["content"]
    assert json.loads(messages[1]["content"]) == {"query": "What is 1+1?"}
    assert json.loads(messages[2]["content"]) == {"answer": "2"}
    assert json.loads(messages[-1]["content"]) == {"query": "What is 2+2?"}


async def test_batch_runs_concurrently():
    import time

    lm = oracle_lm(latency=0.05, max_concurrency=16)
    program = await build_program(lm)
    x, _ = dataset()
    started = time.perf_counter()
    await program.predict(x, batch_size=10)
    assert time.perf_counter() - started < 0.3  # 10 x 50 ms sequentially would be 500 ms


async def test_failed_predictions_are_none_and_counted():
    program = await build_program(unparsable_lm())
    x, _ = dataset(4)
    with synalinks.usage.track() as usage:
        predictions = await program.predict(x)
    assert list(predictions) == [None] * 4
    assert program.last_failures == 4 and program.failed_predictions == 4
    assert usage.calls == 8  # each tried once at temperature 0 and once at a small temperature


async def test_partial_failures_do_not_crash_the_batch():
    def respond(request):
        if "France" in request.inputs["query"]:
            return "{broken"
        return {"answer": TRUTH[request.inputs["query"]]}

    program = await build_program(FakeLanguageModel(responder=respond))
    x, _ = dataset(3)
    predictions = await program.predict(x)
    assert predictions[1] is None and predictions[0].answer == "4" and predictions[2] is not None
    assert program.last_failures == 1


async def test_unreachable_lm_fails_fast_with_a_clear_error():
    lm = FakeLanguageModel(
        failure_rate=1.0, failure="unreachable", retries=0, api_base="http://lm:1234"
    )
    program = await build_program(lm)
    x, _ = dataset(3)
    with pytest.raises(synalinks.LanguageModelUnreachable, match="http://lm:1234"):
        await program.predict(x)


async def test_wrong_data_model_class_is_a_clear_error():
    class Other(synalinks.DataModel):
        text: str

    program = await build_program(oracle_lm())
    with pytest.raises(InputMismatchError, match=r"x\[1\] is a Other.*expects Query"):
        await program.predict(np.array([Query(query="a"), Other(text="b")], dtype=object))
    with pytest.raises(InputMismatchError, match="query"):
        await program.predict(np.array([{"question": "a"}], dtype=object))
    with pytest.raises(InputMismatchError, match="must be a Query"):
        await program.predict(np.array(["just a string"], dtype=object))


async def test_same_schema_other_class_and_dicts_are_accepted():
    program = await build_program(oracle_lm())
    Rebuilt = synalinks.data_model_from_schema(Query.get_schema())
    predictions = await program.predict(
        [Rebuilt(query="What is 2+2?"), {"query": "Capital of France?"}]
    )
    assert [p.answer for p in predictions] == ["4", "Paris"]


async def test_mismatched_schemas_between_connected_modules():
    class Other(synalinks.DataModel):
        text: str

    generator = synalinks.Generator(data_model=Answer, language_model=oracle_lm())
    await generator(synalinks.Input(data_model=Query))
    with pytest.raises(SchemaMismatchError, match=r"built for input.*Query.*Other"):
        await generator(synalinks.Input(data_model=Other))


async def test_outputs_must_come_from_the_inputs():
    a = synalinks.Input(data_model=Query)
    b = synalinks.Input(data_model=Query)
    out = await synalinks.Generator(data_model=Answer, language_model=oracle_lm())(b)
    with pytest.raises(ValueError, match="not among its inputs"):
        synalinks.Program(inputs=a, outputs=out)


async def test_multi_module_graph_and_chain_of_thought():
    class Draft(synalinks.DataModel):
        draft: str

    def respond(request):
        if "query" in request.inputs:
            return {"thinking": "let me think", "draft": TRUTH[request.inputs["query"]]}
        return {"answer": request.inputs["draft"].upper()}

    lm = FakeLanguageModel(responder=respond)
    inputs = synalinks.Input(data_model=Query)
    draft = await synalinks.ChainOfThought(data_model=Draft, language_model=lm, name="drafter")(
        inputs
    )
    answer = await synalinks.Generator(data_model=Answer, language_model=lm, name="finisher")(draft)
    program = synalinks.Program(inputs=inputs, outputs=answer, name="two_step")
    assert list(draft.data_model.model_fields) == ["thinking", "draft"]
    assert [v.name for v in program.trainable_variables] == ["drafter/state", "finisher/state"]
    predictions = await program.predict(np.array([Query(query="Capital of France?")], dtype=object))
    assert predictions[0].answer == "PARIS"
    text = program.summary(print_fn=None)
    assert "drafter (ChainOfThought)" in text and "finisher (Generator)" in text


async def test_sequential_builder():
    program = synalinks.Sequential(
        [
            synalinks.Input(data_model=Query),
            synalinks.Generator(data_model=Answer, language_model=oracle_lm()),
        ],
        name="seq",
    )
    predictions = await program.predict(dataset(2)[0])
    assert predictions[1].answer == "Paris"


async def test_save_and_load_round_trip(tmp_path):
    program = await build_program(oracle_lm(), name="roundtrip")
    program.trainable_variables[0].assign(
        {
            "instructions": "Be exact.",
            "examples": [{"inputs": {"query": "q"}, "outputs": {"answer": "a"}}],
        }
    )
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(nb_max_examples=2),
    )
    path = tmp_path / "program.json"
    program.save(path)
    saved = json.loads(path.read_text())
    assert saved == json.loads(program.to_json()) == json.loads(json.dumps(program.get_config()))
    loaded = synalinks.Program.load(path)
    assert loaded.name == "roundtrip"
    assert loaded.get_variables() == program.get_variables()
    assert isinstance(loaded.optimizer, synalinks.optimizers.RandomFewShot)
    assert loaded.optimizer.nb_max_examples == 2
    x, y = dataset()
    assert await loaded.evaluate(x, y) == await program.evaluate(x, y)


async def test_load_refuses_unknown_classes(tmp_path):
    program = await build_program(oracle_lm())
    config = program.get_config()
    config["graph"]["modules"][0]["class_name"] = "evil>Popen"
    with pytest.raises(UnknownObjectError, match="evil>Popen"):
        synalinks.Program.from_config(config)


async def test_save_load_variables_and_mismatch(tmp_path):
    program = await build_program(oracle_lm(), name="a")
    program.trainable_variables[0].assign({"instructions": "X", "examples": []})
    path = tmp_path / "vars.json"
    program.save_variables(path)
    same = await build_program(oracle_lm(), name="b")
    same.modules[0].name = program.modules[0].name
    same.trainable_variables[0].name = program.trainable_variables[0].name
    same.load_variables(path)
    assert same.trainable_variables[0].value["instructions"] == "X"

    other = await build_program(oracle_lm(), name="c")
    with pytest.raises(VariableMismatchError, match="missing in file"):
        other.load_variables(path)

    class Other(synalinks.DataModel):
        text: str

    inputs = synalinks.Input(data_model=Other)
    generator = synalinks.Generator(
        data_model=Answer, language_model=oracle_lm(), name=program.modules[0].name
    )
    different = synalinks.Program(inputs=inputs, outputs=await generator(inputs))
    with pytest.raises(VariableMismatchError, match="different schema"):
        different.load_variables(path)


async def test_variables_are_validated_against_their_schema():
    program = await build_program(oracle_lm())
    from training.engine.variables import VariableError

    with pytest.raises(VariableError, match="instructions"):
        program.trainable_variables[0].assign({"instructions": 3, "examples": []})
