"""What an OMEGA step costs: bounded LM output, no call wasted on a value already scored, a
parent given back unchanged is never scored as a "mutation", the hint names label sets only."""

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, build_program, dataset
from tests.engine.helpers_events import EventRecorder
from training.engine.optimizers import OMEGA
from training.engine.optimizers import mutation as mut
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel


def rows(*truths):
    return [{"ground_truth": {"answer": value}} for value in truths]


def test_expected_values_lists_label_sets_not_answers():
    # labels repeat in a batch: listed (sorted), and the hint names them
    labels = mut.expected_values(rows("neg", "pos", "neg", "neutral", "pos"))
    assert labels == {"answer": ["neg", "neutral", "pos"]}
    assert mut.value_hint(labels) == (
        'The output `answer` must be exactly one of: "neg", "neutral", "pos".'
    )
    # answers that never repeat (numbers of a QA set) are not a closed set: nothing listed
    assert mut.expected_values(rows("72", "624", "38", "62")) == {}
    assert mut.value_hint({}) == ""
    # long values are never labels
    assert mut.expected_values(rows("x" * 60, "x" * 60)) == {}


class Counting:
    """A task LM right only with PHRASE in its instructions; counts its calls."""

    PHRASE = "Answer exactly"

    def __init__(self):
        self.lm = FakeLanguageModel(responder=self.respond)

    def respond(self, request):
        if self.PHRASE.lower() in request.instructions.lower():
            return {"answer": TRUTH[request.inputs["query"]]}
        return {"answer": "unknown"}


def echo_parent_lm():
    """An optimizer LM that always gives the current value back (a no-op mutation)."""

    def respond(request):
        current = request.inputs.get("current_variable") or request.inputs.get("candidate_a")
        return {"thinking": "fine as is", "instructions": current["instructions"]}

    lm = FakeLanguageModel(responder=respond)
    lm.record_requests = True
    return lm


async def fit(optimizer_lm, task, few_shot_learning, epochs=2, merging_rate=0.02):
    optimizer = OMEGA(
        language_model=optimizer_lm,
        embedding_model=FakeEmbeddingModel(),
        few_shot_learning=few_shot_learning,
        merging_rate=merging_rate,
        seed=0,
    )
    program = await build_program(task.lm)
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    x, y = dataset()
    recorder = EventRecorder()
    await program.fit(
        x, y, validation_split=0.3, epochs=epochs, batch_size=4, seed=0, callbacks=[recorder]
    )
    return program, optimizer, recorder


async def test_a_parent_given_back_is_not_a_mutation_and_is_not_scored_again():
    task = Counting()
    lm = echo_parent_lm()
    program, optimizer, recorder = await fit(lm, task, few_shot_learning=False)
    steps = len(lm.requests)
    assert steps == 4 and optimizer.unchanged_operations == steps  # 2 batches x 2 epochs
    # nothing new to score: only the seed was ever a candidate
    operations = {e["operation"] for e in recorder.of("candidate")}
    assert operations == {"seed"}


async def test_with_few_shot_learning_an_unchanged_rewrite_is_an_examples_candidate():
    task = Counting()
    lm = echo_parent_lm()
    program, optimizer, recorder = await fit(
        lm, task, few_shot_learning=True, epochs=3, merging_rate=0.5
    )
    assert {r.module.split("_")[1] for r in lm.requests} == {"mutation", "crossover"}
    scored = [e for e in recorder.of("candidate") if e["status"] == "scored"]
    children = [e for e in scored if e["operation"] != "seed"]
    assert children and optimizer.unchanged_operations == len(lm.requests)
    # never labelled a mutation or a crossover; its one parent is the one it copies
    assert {e["operation"] for e in children} == {"few_shot"}
    assert all(len(e["parent_ids"]) == 1 for e in children)
    seed = next(e for e in scored if e["operation"] == "seed")
    for child in children:
        assert child["value"]["instructions"] == seed["value"]["instructions"]
        assert child["value"]["examples"]  # what makes it a new candidate


async def test_an_assignment_already_scored_costs_no_prediction():
    task = Counting()
    program, optimizer, _ = await fit(echo_parent_lm(), task, few_shot_learning=False, epochs=1)
    seed = program.variables[0].candidates[0]
    calls, reuses = task.lm.calls, optimizer.score_reuses
    reward = await optimizer.score({program.variables[0].name: seed["value"]})
    assert reward == seed["reward"]
    assert task.lm.calls == calls and optimizer.score_reuses == reuses + 1
    # a value never scored is predicted (3 validation examples)
    other = {"instructions": Counting.PHRASE, "examples": []}
    assert await optimizer.score({program.variables[0].name: other}) == 1.0
    assert task.lm.calls == calls + 3


async def test_the_operators_output_is_bounded_in_its_schema():
    lm = echo_parent_lm()
    await fit(lm, Counting(), few_shot_learning=False, epochs=1)
    schema = lm.requests[0].schema["properties"]
    assert set(schema) == {"thinking", "instructions"}
    assert schema["thinking"]["maxLength"] == mut.MAX_THINKING_CHARS
    assert schema["instructions"]["maxLength"] == mut.MAX_TEXT_CHARS
    assert mut.MAX_THINKING_CHARS <= 120 and mut.MAX_TEXT_CHARS <= 400


@pytest.mark.parametrize("few_shot_learning", [False, True])
async def test_learning_still_works(few_shot_learning):
    """A mutation that finds the phrase still wins (the cost cuts keep what matters)."""
    texts = ["Be brief.", f"{Counting.PHRASE}."]
    count = {"n": 0}

    def respond(request):
        count["n"] += 1
        return {"thinking": "t", "instructions": texts[(count["n"] - 1) % 2]}

    program, optimizer, recorder = await fit(
        FakeLanguageModel(responder=respond), Counting(), few_shot_learning
    )
    assert Counting.PHRASE in program.variables[0].value["instructions"]
    assert recorder.of("selection")[-1]["beat_seed"] >= 1
