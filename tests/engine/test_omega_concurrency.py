"""OMEGA's steps run concurrently (with each other, with the next batch's predictions, and
while candidates are scored), each candidate scored with its own values; a seeded fit stays
reproducible; the champion is the seed unless a candidate beats it by more than a tie."""

import asyncio
import random

import pytest

from tests.engine.helpers_engine import dataset
from tests.engine.helpers_events import EventRecorder
from tests.engine.test_omega import PHRASE, compiled, make_omega, phrase_learner
from training.engine.optimizers import selection
from training.engine.testing import FakeLanguageModel
from training.engine.variables import Variable, VariableError, assigned


def instruction_lm(texts, latency=None, max_concurrency=8, seed=0):
    """The optimizer LM: the n-th mutation writes ``texts[n % len]``; while it 'thinks' it
    records what else happened (async, so other tasks run meanwhile)."""
    rng = random.Random(seed)
    state = {"n": 0, "in_flight": 0, "max_in_flight": 0}

    async def respond(request):
        index = state["n"]
        state["n"] += 1
        state["in_flight"] += 1
        state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
        try:
            await asyncio.sleep(latency() if latency else 0.02 * rng.random())
        finally:
            state["in_flight"] -= 1
        if request.module.startswith("omega_crossover"):
            a = request.inputs["candidate_a"]["instructions"]
            return {"thinking": "merge", "instructions": f"{a} merged"}
        return {"thinking": "be precise", "instructions": texts[index % len(texts)]}

    lm = FakeLanguageModel(
        model=f"fake/optimizer-{max_concurrency}",
        responder=respond,
        max_concurrency=max_concurrency,
    )
    lm.state = state
    return lm


def test_assigned_values_are_scoped_to_the_task():
    variable = Variable({"instructions": "real"}, name="v")
    real_hash = variable.hash

    async def read(value):
        with assigned([variable], {"v": {"instructions": value}}):
            await asyncio.sleep(0.01)
            return variable.value["instructions"], variable.get("instructions"), variable.hash

    async def both():
        return await asyncio.gather(read("a"), read("b"))

    (a, a_get, a_hash), (b, b_get, b_hash) = asyncio.run(both())
    assert (a, a_get, b, b_get) == ("a", "a", "b", "b")
    assert len({a_hash, b_hash, real_hash}) == 3
    assert variable.value == {"instructions": "real"} and variable.hash == real_hash


def test_assigned_refuses_unknown_names_and_bad_values():
    variable = Variable(
        {"n": 1},
        name="v",
        schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    with pytest.raises(VariableError, match="no variable named \\['w'\\]"):
        with assigned([variable], {"w": {"n": 2}}):
            pass
    with pytest.raises(VariableError, match="does not match its schema"):
        with assigned([variable], {"v": {"n": "two"}}):
            pass
    assert variable.value == {"n": 1}


async def test_a_step_runs_while_the_next_batch_is_predicted():
    task_lm = phrase_learner()
    seen = []

    async def respond(request):
        before = task_lm.calls
        await asyncio.sleep(0.05)  # the 'thinking': fit may go on meanwhile
        seen.append(task_lm.calls - before)
        return {"thinking": "x", "instructions": f"Be brief. {PHRASE}."}

    optimizer = make_omega(FakeLanguageModel(responder=respond))
    program = await compiled(optimizer, task_lm)
    x, y = dataset()
    await program.fit(x, y, validation_split=0.3, epochs=1, batch_size=2, seed=0)
    # predictions (the next batch's, the validation scoring) ran during the mutation calls
    assert seen and max(seen) > 0


async def test_concurrent_steps_are_bounded_by_the_lm_concurrency():
    for limit, expected in ((1, 1), (3, 3)):
        lm = instruction_lm(
            [f"v{i}" for i in range(50)], latency=lambda: 0.05, max_concurrency=limit
        )
        program = await compiled(make_omega(lm, population_size=50), phrase_learner())
        x, y = dataset()
        await program.fit(x, y, epochs=1, batch_size=1, seed=0)
        assert lm.state["max_in_flight"] == expected


async def test_concurrent_candidates_are_scored_with_their_own_values():
    texts = ["Be brief.", f"Be brief. {PHRASE}.", "Say little.", f"{PHRASE} always."]
    lm = instruction_lm(texts)
    program = await compiled(make_omega(lm, population_size=20), phrase_learner())
    x, y = dataset()
    await program.fit(x, y, validation_split=0.3, epochs=2, batch_size=1, seed=0)
    candidates = [c for c in program.trainable_variables[0].candidates if c["operation"] != "seed"]
    assert len(candidates) > 4
    for candidate in candidates:
        right = PHRASE.lower() in candidate["value"]["instructions"].lower()
        assert candidate["reward"] == (1.0 if right else 0.0), candidate


async def test_a_seeded_fit_is_reproducible_whatever_order_steps_finish_in():
    async def run(latency_seed):
        lm = instruction_lm([f"v{i}" for i in range(40)] + [PHRASE], seed=latency_seed)
        optimizer = make_omega(lm, merging_rate=0.5, population_size=6, seed=7)
        program = await compiled(optimizer, phrase_learner())
        x, y = dataset()
        await program.fit(x, y, validation_split=0.3, epochs=3, batch_size=1, seed=1)
        return [
            (c["id"], c["operation"], c["parent_ids"], c["value"], c["reward"], c["status"])
            for c in program.trainable_variables[0].candidates
        ]

    first, second = await run(0), await run(1)
    assert first == second


# -- the champion: the seed unless a candidate beats it -------------------------------------
def test_champion_keeps_the_seed_on_a_tie_and_takes_a_better_candidate():
    seed = {"id": "c1", "operation": "seed", "reward": 0.5}
    tie = {"id": "c2", "operation": "mutation", "reward": 0.5 + 1e-12}
    better = {"id": "c3", "operation": "mutation", "reward": 2 / 3}
    best_late = {"id": "c4", "operation": "crossover", "reward": 2 / 3}
    assert selection.champion([tie, seed]) is seed  # order does not matter: the seed holds
    assert selection.champion([seed, tie, better, best_late]) is better
    assert selection.count_beating([seed, tie, better, best_late]) == (3, 2)
    assert selection.champion([tie, better]) is better  # no seed: simply the best
    assert selection.champion([{"id": "c9", "operation": "seed", "reward": None}]) is None


async def test_a_run_whose_candidates_only_tie_keeps_the_seed_and_says_so():
    # every mutation is wrong: all candidates score 0.0, the seed's reward
    lm = instruction_lm([f"wrong {i}" for i in range(20)])
    optimizer = make_omega(lm, population_size=20)
    program = await compiled(optimizer, phrase_learner())
    start = dict(program.trainable_variables[0].value)
    x, y = dataset()
    recorder = EventRecorder()
    await program.fit(
        x, y, validation_split=0.3, epochs=2, batch_size=2, seed=0, callbacks=[recorder]
    )
    assert program.trainable_variables[0].value == start
    events = recorder.of("selection")
    assert [e["epoch"] for e in events] == [0, 1]
    last = events[-1]
    assert last["beat_seed"] == 0 and last["candidates"] > 0
    assert last["seed_reward"] == last["champion_reward"] == 0.0
    assert optimizer.candidates_beating_seed == 0


async def test_the_selection_event_counts_the_candidates_that_beat_the_seed():
    lm = instruction_lm(["wrong", f"Be brief. {PHRASE}.", "also wrong"])
    optimizer = make_omega(lm, population_size=20)
    program = await compiled(optimizer, phrase_learner())
    x, y = dataset()
    recorder = EventRecorder()
    await program.fit(
        x, y, validation_split=0.3, epochs=1, batch_size=2, seed=0, callbacks=[recorder]
    )
    (event,) = recorder.of("selection")
    assert event["seed_reward"] == 0.0 and event["champion_reward"] == 1.0
    assert event["beat_seed"] == 1 == optimizer.candidates_beating_seed
    assert set(event) == {
        "type",
        "epoch",
        "variable",
        "candidates",
        "beat_seed",
        "seed_reward",
        "champion_id",
        "champion_reward",
    }
