"""Pinned few-shot examples: every candidate RandomFewShot and OMEGA propose keeps them, and
they survive saving and loading the program (a branch's person-pinned demonstrations)."""

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, build_program, dataset, few_shot_learner
from tests.engine.optimizers.test_omega import make_omega, mutation_lm, phrase_learner
from training.engine.variables import VariableError

PINNED = {"inputs": {"query": "Pinned question?"}, "outputs": {"answer": "pinned"}}


async def pinned_program(lm):
    program = await build_program(lm)
    state = program.trainable_variables[0]
    state.assign({"instructions": "Answer.", "examples": [PINNED]})
    state.pin_examples([PINNED])
    return program, state


def assert_every_candidate_pinned(state):
    assert len(state.candidates) >= 3
    for candidate in state.candidates:
        assert candidate["value"]["examples"][0] == PINNED
        assert candidate["value"]["examples"].count(PINNED) == 1


async def test_random_few_shot_keeps_the_pinned_example_in_every_candidate():
    program, state = await pinned_program(few_shot_learner())
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(
            nb_min_examples=1, nb_max_examples=2, nb_candidates=2, seed=0
        ),
    )
    x, y = dataset()
    await program.fit(x, y, validation_split=0.3, epochs=2, batch_size=4, seed=0)
    assert_every_candidate_pinned(state)
    sampled = [e for c in state.candidates for e in c["value"]["examples"] if e != PINNED]
    assert sampled and all(e["outputs"]["answer"] == TRUTH[e["inputs"]["query"]] for e in sampled)
    assert state.value["examples"][0] == PINNED  # the value fit leaves assigned too


async def test_omega_mutations_and_samples_keep_the_pinned_example():
    program, state = await pinned_program(phrase_learner())
    optimizer = make_omega(mutation_lm(), few_shot_learning=True, nb_max_examples=2)
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    x, y = dataset()
    await program.fit(x, y, validation_split=0.3, epochs=2, batch_size=4, seed=0)
    assert {c["operation"] for c in state.candidates} >= {"seed", "mutation"}
    assert_every_candidate_pinned(state)


async def test_pins_are_saved_and_loaded_with_the_program(tmp_path):
    program, state = await pinned_program(few_shot_learner())
    assert program.get_config()["variables"][state.name]["pinned_examples"] == [PINNED]
    program.save(tmp_path / "p.json")
    loaded = synalinks.Program.load(tmp_path / "p.json")
    assert loaded.trainable_variables[0].pinned_examples == [PINNED]
    other = await build_program(few_shot_learner())
    (saved,) = other.get_config()["variables"].values()
    assert "pinned_examples" not in saved


def test_with_pinned_puts_pins_first_and_drops_their_duplicates():
    variable = synalinks.Variable({"examples": []}, name="v")
    other = {"inputs": {"query": "x"}, "outputs": {"answer": "y"}}
    variable.pin_examples([PINNED])
    value = variable.with_pinned({"examples": [other, dict(PINNED)]})
    assert value["examples"] == [PINNED, other]
    with pytest.raises(VariableError, match="pinned example must be"):
        variable.pin_examples([{"inputs": {}}])
    with pytest.raises(VariableError, match="no examples to pin"):
        synalinks.Variable({"instructions": ""}, name="w").pin_examples([PINNED])
