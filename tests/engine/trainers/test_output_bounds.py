"""Fit holds the program's string outputs to a length learnt from the targets
(``output_bounds``): inside fit only, the program's own modules only, rewards unchanged."""

from types import SimpleNamespace

import numpy as np
from pydantic import Field

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, Answer, Query, build_program, dataset
from training.engine.optimizers import OMEGA
from training.engine.optimizers.mutation import MAX_TEXT_CHARS
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel
from training.engine.trainers import output_bounds


def test_bound_is_twice_the_longest_target_and_never_under_the_floor():
    long_answer = "x" * 40
    targets = [Answer(answer="72"), Answer(answer=long_answer), {"answer": "abc", "n": 3}]
    assert output_bounds.from_targets(targets) == {"answer": 2 * len(long_answer)}
    assert output_bounds.from_targets([Answer(answer="72")]) == {
        "answer": output_bounds.MIN_OUTPUT_CHARS
    }
    # a field that is not always a string is left alone
    assert output_bounds.from_targets([{"n": 3}, {"n": "3"}]) == {}


def test_bounded_model_keeps_fields_and_tighter_own_bounds():
    class Short(synalinks.DataModel):
        answer: str = Field(description="the answer", max_length=10)
        note: str

    module = SimpleNamespace(language_model=SimpleNamespace(holds_to_schema=True))
    other = SimpleNamespace(language_model=SimpleNamespace(holds_to_schema=True))
    with output_bounds.bounding([module], {"answer": 50, "note": 40}):
        bounded = output_bounds.bounded(module, Short)
        untouched = output_bounds.bounded(other, Short)
    properties = bounded.get_schema()["properties"]
    assert properties["answer"]["maxLength"] == 10  # its own bound was tighter
    assert properties["answer"]["description"] == "the answer"
    assert properties["note"]["maxLength"] == 40
    assert untouched is Short  # another module
    assert output_bounds.bounded(module, Short) is Short  # outside the block


class Said(synalinks.DataModel):
    """An output field named like the mutation's own (the variable's ``instructions``)."""

    instructions: str


def bound_of(request, field):
    """The maxLength the request's schema puts on ``field`` (None: unbounded)."""
    return ((request.schema or {}).get("properties", {}).get(field) or {}).get("maxLength")


async def test_fit_bounds_the_programs_predictions_but_not_mutations_or_evaluate():
    seen = {"program_fit": set(), "program_evaluate": set(), "mutation": set()}
    phase = {"name": "program_evaluate"}

    def program_lm(request):
        seen[phase["name"]].add(bound_of(request, "instructions"))
        return {"instructions": TRUTH[request.inputs["query"]]}

    def mutation_lm(request):
        # the mutation's output has a field of the same name, bounded by its own rule only
        seen["mutation"].add(bound_of(request, "instructions"))
        return {"thinking": "t", "instructions": "Answer in one word."}

    optimizer = OMEGA(
        language_model=FakeLanguageModel(responder=mutation_lm),
        embedding_model=FakeEmbeddingModel(),
        seed=0,
    )
    program = await build_program(
        FakeLanguageModel(responder=program_lm, holds_to_schema=True), output_model=Said
    )
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["instructions"]), optimizer=optimizer
    )
    x, _ = dataset()
    y = np.array([Said(instructions=a) for a in TRUTH.values()], dtype="object")
    longest = max(len(a) for a in TRUTH.values())
    expected = max(output_bounds.MIN_OUTPUT_CHARS, output_bounds.OUTPUT_LENGTH_FACTOR * longest)

    before = await program.evaluate(x, y)
    phase["name"] = "program_fit"
    history = await program.fit(x, y, epochs=1, batch_size=4, validation_split=0.25, seed=0)
    phase["name"] = "program_evaluate"
    after = await program.evaluate(x, y)

    assert seen["program_fit"] == {expected}
    assert history.params["output_bounds"] == {"instructions": expected}  # said, not hidden
    assert seen["program_evaluate"] == {None}
    assert seen["mutation"] == {MAX_TEXT_CHARS}
    assert before["reward"] == after["reward"] == 1.0
    assert history.history["reward"] == [1.0]


async def test_a_rambling_prediction_is_cut_to_the_bound_and_scores_as_before():
    """What the local model's grammar does with the bound, played by the fake: the answer
    stops at maxLength. Exact match scores it 0 either way."""

    def rambler(request):
        text = f"The final answer is {TRUTH[request.inputs['query']]}, because " + "so " * 60
        bound = bound_of(request, "answer")
        return {"answer": text if bound is None else text[:bound]}

    program = await build_program(FakeLanguageModel(responder=rambler, holds_to_schema=True))
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(seed=0),
    )
    x, y = dataset()
    unbounded = await program.evaluate(x, y)
    history = await program.fit(x, y, epochs=1, batch_size=4, seed=0)
    assert unbounded["reward"] == history.history["reward"][0] == 0.0
    predictions = await program.predict(np.array([Query(query=next(iter(TRUTH)))]))
    assert len(predictions[0].get("answer")) > output_bounds.MIN_OUTPUT_CHARS


async def test_fit_without_bounds_sends_the_schema_as_it_is():
    seen = set()

    def program_lm(request):
        seen.add(bound_of(request, "answer"))
        return {"answer": TRUTH[request.inputs["query"]]}

    program = await build_program(FakeLanguageModel(responder=program_lm, holds_to_schema=True))
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(seed=0),
    )
    x, y = dataset()
    history = await program.fit(x, y, epochs=1, batch_size=4, seed=0, bound_outputs=False)
    assert seen == {None}
    assert history.params["output_bounds"] == {}


async def test_a_model_that_may_ignore_maxlength_is_not_bounded():
    """A provider that may not hold to maxLength would fail (and retry) a longer answer."""
    seen = set()

    def program_lm(request):
        seen.add(bound_of(request, "answer"))
        return {"answer": TRUTH[request.inputs["query"]]}

    program = await build_program(FakeLanguageModel(responder=program_lm))
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(seed=0),
    )
    x, y = dataset()
    await program.fit(x, y, epochs=1, batch_size=4, seed=0)
    assert seen == {None}
    assert synalinks.LanguageModel(model="local/smollm2").holds_to_schema
