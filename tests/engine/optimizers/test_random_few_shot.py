"""RandomFewShot: correct examples only, never worse on validation, no extra LM calls."""

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, build_program, dataset, few_shot_learner
from training.engine.testing import FakeLanguageModel


def compile_rfs(program, **kwargs):
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(**kwargs),
    )
    return program


async def test_learns_examples_and_improves():
    program = compile_rfs(
        await build_program(few_shot_learner()), nb_min_examples=1, nb_max_examples=2
    )
    x, y = dataset()
    before = await program.evaluate(x[7:], y[7:])
    history = await program.fit(x, y, validation_split=0.3, epochs=2, batch_size=4, seed=0)
    after = await program.evaluate(x[7:], y[7:])
    assert before["reward"] == 0.0 and after["reward"] == 1.0
    assert history.history["val_reward"][-1] == 1.0
    examples = program.trainable_variables[0].value["examples"]
    assert 1 <= len(examples) <= 2


async def test_examples_are_ground_truth_or_full_reward_predictions_only():
    # an LM that is wrong on every even-indexed question
    wrong = {q for i, q in enumerate(TRUTH) if i % 2 == 0}

    def respond(request):
        query = request.inputs["query"]
        return {"thinking": "hmm", "answer": "WRONG" if query in wrong else TRUTH[query]}

    lm = FakeLanguageModel(responder=respond)
    program = compile_rfs(
        await build_program(lm, module=synalinks.ChainOfThought),
        nb_min_examples=3,
        nb_max_examples=5,
        nb_candidates=4,
    )
    x, y = dataset()
    await program.fit(x, y, validation_split=0.2, epochs=3, batch_size=4, seed=1)
    pool = program.optimizer.example_pool[program.trainable_variables[0].name]
    assert pool  # some examples were collected
    for (
        example
    ) in pool:  # ChainOfThought output: ground truth has no `thinking`, so only correct predictions
        query = example["inputs"]["query"]
        assert query not in wrong and example["outputs"]["answer"] == TRUTH[query]
        assert example["outputs"]["thinking"] == "hmm"
    for variable in program.trainable_variables:
        for candidate in variable.candidates:
            for example in candidate["value"]["examples"]:
                assert example["outputs"]["answer"] == TRUTH[example["inputs"]["query"]]


async def test_ground_truth_used_for_generator_even_when_prediction_wrong():
    lm = FakeLanguageModel(responder=lambda r: {"answer": "WRONG"})
    program = compile_rfs(await build_program(lm))
    x, y = dataset(6)
    await program.fit(x, y, epochs=1, batch_size=3, seed=0)
    pool = program.optimizer.example_pool[program.trainable_variables[0].name]
    assert len(pool) == 6
    assert all(e["outputs"]["answer"] == TRUTH[e["inputs"]["query"]] for e in pool)


async def test_never_worse_than_the_starting_variables():
    # examples HURT this LM: with examples it answers wrong, without it is right
    def respond(request):
        if request.examples:
            return {"answer": "confused"}
        return {"answer": TRUTH[request.inputs["query"]]}

    program = compile_rfs(
        await build_program(FakeLanguageModel(responder=respond)), nb_candidates=3
    )
    x, y = dataset()
    start = program.get_variables()
    history = await program.fit(x, y, validation_split=0.3, epochs=3, batch_size=4, seed=2)
    assert history.history["val_reward"] == [1.0, 1.0, 1.0]
    assert program.get_variables() == start
    candidates = program.trainable_variables[0].candidates
    assert len(candidates) == 1 + 3 * 3
    assert candidates[0]["operation"] == "seed" and candidates[0]["status"] == "best"
    assert all(c["reward"] == 0.0 for c in candidates[1:])


async def test_no_prediction_paid_twice():
    lm = few_shot_learner()
    program = compile_rfs(await build_program(lm))
    x, y = dataset()
    with synalinks.usage.track() as usage:
        await program.fit(x, y, validation_split=0.3, epochs=3, batch_size=7, seed=3)
    # every (variables, input) pair predicted at most once
    assert usage.calls == lm.calls
    seen = set()
    lm2 = few_shot_learner()
    lm2.record_requests = True
    program2 = compile_rfs(await build_program(lm2))
    await program2.fit(x, y, validation_split=0.3, epochs=3, batch_size=7, seed=3)
    for request in lm2.requests:
        key = (str(request.state), request.inputs["query"])
        assert key not in seen, f"paid twice for {key}"
        seen.add(key)
    # upper bound: 7 train x (1 + epochs where the variables changed) + 3 val x candidates
    candidates = len(program2.trainable_variables[0].candidates)
    assert lm2.calls <= 7 * 4 + 3 * candidates


async def test_no_memo_when_temperature_is_not_zero():
    lm = few_shot_learner(temperature=0.7)
    program = compile_rfs(await build_program(lm))
    x, y = dataset(4)
    await program.fit(x, y, epochs=2, batch_size=4, seed=0)
    assert lm.calls >= 4 * 2 + 4 * 2  # train + candidate scoring each epoch, nothing memoised


def test_argument_checks():
    with pytest.raises(ValueError, match="nb_min_examples"):
        synalinks.optimizers.RandomFewShot(nb_min_examples=4, nb_max_examples=2)
    optimizer = synalinks.optimizers.RandomFewShot(
        few_shot_learning=True, nb_min_examples=2, nb_max_examples=5
    )
    assert (
        synalinks.optimizers.RandomFewShot.from_config(optimizer.get_config()).get_config()
        == optimizer.get_config()
    )


async def test_a_one_off_failure_is_retried_by_the_next_scoring_not_replayed():
    """A failed prediction is not memoised: the next scoring asks again and counts one failure."""
    failed_once = set()

    def respond(request):
        query = request.inputs["query"]
        if query == "Square root of 9?" and query not in failed_once:
            failed_once.add(query)
            raise RuntimeError("simulated one-off provider failure")
        if request.examples:  # examples only hurt here, so the starting variables stay best
            return {"answer": "unknown"}
        return {"answer": TRUTH[query]}

    lm = FakeLanguageModel(responder=respond, retries=0)
    program = compile_rfs(await build_program(lm))
    x, y = dataset(10)  # validation_split=0.3 holds out the last three, this one included
    history = await program.fit(x, y, validation_split=0.3, epochs=3, batch_size=7, seed=0)
    assert failed_once == {"Square root of 9?"}
    assert program.failed_predictions == 1
    assert history.history["val_reward"][-1] == 1.0  # rescored, not the replayed failure
