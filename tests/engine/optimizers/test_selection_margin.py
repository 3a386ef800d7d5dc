"""The champion rule (``selection.champion``): keep the seed unless a candidate beats it by at
least one validation example's worth; a run never ends below its start on validation; the
``selection`` event says how many candidates beat the seed."""

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, build_program, dataset
from tests.engine.helpers_events import EventRecorder
from training.engine.optimizers import OMEGA
from training.engine.optimizers import selection as sel
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel


def candidate(cid, reward, operation="mutation"):
    return {"id": cid, "operation": operation, "reward": reward, "value": {"v": cid}}


def test_margin_is_one_example_of_the_scoring_set():
    assert sel.tie_margin(6) == pytest.approx(1 / 6)
    assert sel.tie_margin(3) == pytest.approx(1 / 3)
    assert sel.tie_margin(None) == sel.MIN_TIE_MARGIN
    assert sel.tie_margin(0) == sel.MIN_TIE_MARGIN


def test_seed_kept_on_ties_and_on_gains_below_one_example():
    margin = sel.tie_margin(6)
    seed = candidate("c1", 0.5, "seed")
    # ties and a gain of less than one example (e.g. a continuous reward's noise) keep the seed
    pool = [seed, candidate("c2", 0.5), candidate("c3", 0.5 + margin / 2)]
    assert sel.champion(pool, margin) is seed
    assert sel.count_beating(pool, margin) == (2, 0)
    # one example's worth (a 1/6 step of an exact-match mean, float noise included) beats it
    one_more = candidate("c4", 4 / 6)
    two_more = candidate("c5", 5 / 6)
    late_tie = candidate("c6", 5 / 6)
    pool += [one_more, two_more, late_tie]
    assert sel.champion(pool, margin) is two_more  # the best; ties to the earliest
    assert sel.count_beating(pool, margin) == (5, 3)
    # a worse candidate never wins, whatever the order
    assert sel.champion([candidate("c7", 0.9), candidate("c8", 0.8, "seed")], margin)["id"] == (
        "c8"
    )
    # unscored candidates do not count; without a seed the best is taken
    assert sel.champion([candidate("c9", None, "seed"), candidate("c10", 0.1)], margin)["id"] == (
        "c10"
    )
    assert sel.champion([], margin) is None


def phrase_learner(phrase):
    def respond(request):
        if phrase.lower() in request.instructions.lower():
            return {"answer": TRUTH[request.inputs["query"]]}
        return {"answer": "unknown"}

    return FakeLanguageModel(responder=respond)


def scripted_mutations(texts):
    calls = {"n": 0}

    def respond(request):
        calls["n"] += 1
        return {"thinking": "t", "instructions": texts[(calls["n"] - 1) % len(texts)]}

    return FakeLanguageModel(responder=respond)


async def fit_omega(mutation_texts, phrase="Answer exactly"):
    optimizer = OMEGA(
        language_model=scripted_mutations(mutation_texts),
        embedding_model=FakeEmbeddingModel(),
        seed=0,
    )
    program = await build_program(phrase_learner(phrase))
    program.variables[0].assign({"instructions": "Start here.", "examples": []})
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    x, y = dataset()
    recorder = EventRecorder()
    history = await program.fit(
        x, y, validation_split=0.3, epochs=2, batch_size=4, seed=0, callbacks=[recorder]
    )
    return program, optimizer, recorder, history


def test_a_score_without_per_example_rewards_is_never_paired_against_one_with_them():
    """A candidate whose score was remembered from a saved state has no per-example rewards:
    it cannot be paired with the seed's, so it does not beat it, however high its mean."""
    seed = {**candidate("c1", 0.5, "seed"), "example_rewards": [1.0, 0.0] * 10}
    remembered = candidate("c2", 0.9)
    paired = {**candidate("c3", 0.9), "example_rewards": [1.0] * 18 + [0.0] * 2}
    assert sel.champion([seed, remembered], sel.tie_margin(20)) is seed
    assert sel.champion([seed, remembered, paired], sel.tie_margin(20)) is paired


async def test_candidates_that_only_tie_leave_the_seed_in_place():
    # every mutation changes the wording but not one answer: all tie the seed at 0.0
    program, optimizer, recorder, history = await fit_omega(["Be brief.", "Be concise.", "Hm."])
    assert program.variables[0].value["instructions"] == "Start here."
    assert optimizer.tie_margin == pytest.approx(1 / 3)  # 3 validation examples
    selections = recorder.of("selection")
    assert [s["epoch"] for s in selections] == [0, 1]
    assert all(s["beat_seed"] == 0 and s["candidates"] > 0 for s in selections)
    assert selections[-1]["champion_id"] == "c1"  # the seed
    assert optimizer.candidates_beating_seed == 0
    best = [e for e in recorder.of("candidate") if e["status"] == "best"]
    assert [e["operation"] for e in best] == ["seed"]
    assert min(history.history["val_reward"]) >= selections[0]["seed_reward"]


async def test_a_candidate_that_beats_the_seed_is_taken_and_counted():
    program, optimizer, recorder, history = await fit_omega(["Be brief.", "Answer exactly."])
    assert program.variables[0].value["instructions"] == "Answer exactly."
    last = recorder.of("selection")[-1]
    assert last["beat_seed"] >= 1 and last["seed_reward"] == 0.0
    assert last["champion_reward"] == 1.0 and last["champion_id"] != "c1"
    assert last["margin"] == pytest.approx(1 / 3, abs=1e-6)
    assert optimizer.candidates_beating_seed == last["beat_seed"]
    assert history.history["val_reward"][-1] == 1.0
