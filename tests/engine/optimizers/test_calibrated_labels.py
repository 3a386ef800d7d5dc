"""CalibratedLabels and label fields decided from scores.

The task LM is a scripted model of a biased small model: it scores every label, always far
ahead for ``bug``, with a weak nudge towards the row's true team (what a 135M model's label
scores look like on a task it half knows). Its first pick is then ``bug`` for everything; a
bias per label, learned from the training rows, turns the nudge into the right answer. The
fake embeddings are hashed bags of words, so a message's nearest training rows share its
words (and its team).
"""

from __future__ import annotations

import random
from typing import Literal

import numpy as np
import pytest

import training.engine as synalinks
from tests.engine.helpers_events import EventRecorder
from training.engine.modules import label_decision, label_readout
from training.engine.optimizers import CalibratedLabels
from training.engine.saving import register_synalinks_serializable
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel

TEAMS = ["money", "bug", "box"]
WORDS = {
    "money": ["refund", "invoice", "charge", "payment", "billing", "price"],
    "bug": ["crash", "error", "login", "screen", "freeze", "update"],
    "box": ["parcel", "delivery", "package", "tracking", "courier", "shipping"],
}


class Message(synalinks.DataModel):
    message: str


class Route(synalinks.DataModel):
    team: Literal["money", "bug", "box"]


def rows(count: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    made = []
    for index in range(count):
        team = TEAMS[index % 3]
        words = rng.sample(WORDS[team], 3)
        made.append((f"{' '.join(words)} #{seed}-{index}", team))
    rng.shuffle(made)
    return made


def team_of(message: str) -> str:
    return next(t for t, words in WORDS.items() if any(w in message for w in words))


@register_synalinks_serializable(package="tests")
def biased_scores(request, labels):
    """``bug`` first by far; the row's own team nudged up (not enough to win)."""
    truth = team_of(request.inputs["message"])
    base = {"money": -3.0, "bug": -0.2, "box": -3.5}
    return [base[label] + (1.5 if label == truth else 0.0) for label in labels]


@register_synalinks_serializable(package="tests")
def noise_scores(request, labels):
    """Scores that say nothing about the row (a hash of its text)."""
    seed = sum(map(ord, request.inputs["message"]))
    return [float((seed * (i + 7)) % 5) for i in range(len(labels))]


def arrays(data):
    x = np.array([Message(message=m) for m, _ in data], dtype="object")
    y = np.array([Route(team=t) for _, t in data], dtype="object")
    return x, y


async def program_on(lm, optimizer):
    inputs = synalinks.Input(data_model=Message)
    outputs = await synalinks.Generator(
        data_model=Route, language_model=lm, instructions="Route the message.", name="router"
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="routing")
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["team"]), optimizer=optimizer)
    return program


def scorer_lm(scores=biased_scores):
    return FakeLanguageModel(label_scorer=scores)


async def test_a_label_field_is_decided_from_every_labels_score():
    lm = scorer_lm()
    lm.record_requests = True
    program = await program_on(lm, CalibratedLabels(vote=False))
    x, y = arrays(rows(6, seed=1))
    result = await program.evaluate(x, y)
    assert result["reward"] == pytest.approx(2 / 6)  # "bug" for everything: its first pick
    assert lm.calls == 6  # one scoring per row, no sampling call


async def test_a_model_that_cannot_score_samples_the_label_as_before():
    lm = FakeLanguageModel(responder=lambda request: {"team": "box"})
    program = await program_on(lm, CalibratedLabels(vote=False))
    x, y = arrays(rows(6, seed=1))
    assert (await program.evaluate(x, y))["reward"] == pytest.approx(2 / 6)
    assert not lm.can_score_labels()


async def test_calibration_learns_a_bias_that_turns_a_biased_model_right():
    program = await program_on(scorer_lm(), CalibratedLabels(vote=False, seed=0))
    x, y = arrays(rows(60, seed=2))
    x_test, y_test = arrays(rows(30, seed=3))
    before = (await program.evaluate(x_test, y_test))["reward"]
    recorder = EventRecorder()
    await program.fit(x, y, validation_split=0.25, epochs=1, batch_size=8, seed=0,
                      callbacks=[recorder])  # fmt: skip
    after = (await program.evaluate(x_test, y_test))["reward"]
    assert before == pytest.approx(1 / 3)
    assert after == 1.0
    decision = program.trainable_variables[0].value["decision"]
    assert decision["field"] == "team" and set(decision["bias"]) == set(TEAMS)
    assert decision["bias"]["bug"] < decision["bias"]["money"]
    assert "retrieval" not in program.trainable_variables[0].value  # no vote asked for
    [candidate] = [c for c in program.trainable_variables[0].candidates if c["id"] != "c1"]
    # its evidence: 15 validation rows and the 45 training rows, cross-fitted
    assert candidate["gain"]["n"] == 60 and candidate["gain"]["low"] > 0
    [selection] = recorder.of("selection")
    assert selection["beat_seed"] == 1


async def test_the_inputs_embeddings_decide_when_the_scores_say_nothing():
    optimizer = CalibratedLabels(embedding_model=FakeEmbeddingModel(), seed=0)
    program = await program_on(scorer_lm(noise_scores), optimizer)
    x, y = arrays(rows(60, seed=4))
    x_test, y_test = arrays(rows(30, seed=5))
    await program.fit(x, y, validation_split=0.25, epochs=1, batch_size=8, seed=0)
    decision = program.trainable_variables[0].value["decision"]
    assert decision["readout_weight"] > 0
    assert decision["readout"]["embedding_model"] == FakeEmbeddingModel().model
    assert set(decision["readout"]["weights"]) == set(TEAMS)
    # the read-out alone carries the label here: no vote, so no pool is stored
    assert decision["vote_weight"] == 0 and "retrieval" not in program.trainable_variables[0].value
    assert (await program.evaluate(x_test, y_test))["reward"] >= 0.9


async def test_a_gain_within_noise_keeps_the_seed():
    program = await program_on(scorer_lm(noise_scores), CalibratedLabels(vote=False, seed=0))
    x, y = arrays(rows(24, seed=6))
    recorder = EventRecorder()
    await program.fit(x, y, validation_split=0.25, epochs=1, batch_size=8, seed=0,
                      callbacks=[recorder])  # fmt: skip
    variable = program.trainable_variables[0]
    [candidate] = [c for c in variable.candidates if c["operation"] != "seed"]
    assert candidate["gain"]["low"] <= 0
    assert "decision" not in variable.value  # the seed, as it was
    [selection] = recorder.of("selection")
    assert selection["beat_seed"] == 0


async def test_a_calibrated_program_saves_loads_and_answers_the_same(tmp_path):
    optimizer = CalibratedLabels(embedding_model=FakeEmbeddingModel(), seed=0)
    program = await program_on(scorer_lm(), optimizer)
    x, y = arrays(rows(60, seed=7))
    await program.fit(x, y, validation_split=0.25, epochs=1, batch_size=8, seed=0)
    path = tmp_path / "program.json"
    program.save(str(path))
    loaded = synalinks.Program.load(str(path))
    x_test, _ = arrays(rows(12, seed=8))
    first = await program.predict(x_test)
    again = await loaded.predict(x_test)
    assert [p.get_json() for p in first] == [p.get_json() for p in again]
    assert (
        loaded.trainable_variables[0].value["decision"]
        == (program.trainable_variables[0].value["decision"])
    )


def test_a_stored_decision_is_checked_before_it_is_used():
    labels = ["a", "b"]
    with pytest.raises(ValueError, match="labels outside"):
        label_decision.decide([0, 0], labels, {"field": "f", "bias": {"c": 1}})
    for bad in (float("nan"), 1e9, "1", True):
        with pytest.raises(ValueError, match="numbers within"):
            label_decision.decide(
                [0, 0], labels, {"field": "f", "bias": {}, "lm_weight": bad, "vote_weight": 0}
            )


def test_the_fit_gives_the_lm_no_weight_when_its_scores_carry_nothing():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, size=90)
    counts = np.zeros((90, 3))
    counts[np.arange(90), truth] = 4  # the neighbours agree with the row
    counts += rng.integers(0, 2, size=(90, 3))
    fitted = label_decision.fit_decision(
        TEAMS, "team", rng.normal(size=(90, 3)), np.eye(3)[truth], {5: counts}, seed=0
    )
    assert fitted.config.k == 5 and not fitted.config.use_lm
    assert fitted.decision["vote_weight"] > 0 and "readout" not in fitted.decision  # no vectors
    assert fitted.cv_reward > 0.9


class FreeRoute(synalinks.DataModel):
    team: str


async def test_a_program_with_no_label_field_gets_nearest_few_shots_pool():
    """Nothing to calibrate: the pool NearestFewShot would propose with its own defaults."""
    inputs = synalinks.Input(data_model=Message)
    outputs = await synalinks.Generator(
        data_model=FreeRoute, language_model=FakeLanguageModel(), name="router"
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="free")
    optimizer = CalibratedLabels(embedding_model=FakeEmbeddingModel(), seed=0)
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["team"]), optimizer=optimizer)
    data = rows(24, seed=6)
    x = np.array([Message(message=m) for m, _ in data], dtype="object")
    y = np.array([FreeRoute(team=t) for _, t in data], dtype="object")
    await program.fit(x, y, validation_split=0.25, epochs=1, batch_size=8, seed=0)
    [proposed] = program.trainable_variables[0].candidates[1:]
    retrieval = proposed["value"]["retrieval"]
    assert retrieval["k"] == 4 and retrieval["vote"] is True
    assert "in_prompt" not in retrieval  # the neighbours are shown in the prompt (the default)
    assert "decision" not in proposed["value"]


def test_a_readout_fitted_on_rows_names_their_labels_and_survives_json():
    rng = np.random.default_rng(2)
    directions = rng.normal(size=(3, 16))
    truth = rng.integers(0, 3, size=60)
    vectors = directions[truth] + 0.3 * rng.normal(size=(60, 16))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    weights, intercepts = label_readout.fit_readout(vectors, np.eye(3)[truth])
    scores = label_readout.readout_scores(weights, intercepts, vectors)
    assert (scores.argmax(axis=1) == truth).mean() == 1.0
    stored = label_readout.to_json(weights, intercepts, TEAMS, "local/minilm")
    again = label_readout.readout_scores(*label_readout.from_json(stored, TEAMS), vectors)
    assert np.abs(again - scores).max() < 0.05  # float16 directions
    folds = [list(range(i, 60, 5)) for i in range(5)]
    held = label_readout.out_of_fold(vectors, np.eye(3)[truth], folds)
    assert (held.argmax(axis=1) == truth).mean() >= 0.9


def test_a_stored_readout_is_checked_before_it_is_used():
    weights, intercepts = label_readout.fit_readout(np.eye(4)[:, :3], np.eye(2)[[0, 1, 0, 1]])
    good = label_readout.to_json(weights, intercepts, ["a", "b"], "local/minilm")
    decision = {"field": "f", "bias": {}, "lm_weight": 1, "vote_weight": 0,
                "readout_weight": 1, "readout": good}  # fmt: skip
    label_decision.check_decision(decision, ["a", "b"])
    with pytest.raises(ValueError, match="name exactly"):
        label_decision.check_decision(decision, ["a", "b", "c"])
    for key, bad in (("norms", float("inf")), ("intercepts", 1e6), ("norms", "2")):
        broken = {**good, key: {**good[key], "a": bad}}
        with pytest.raises(ValueError, match="numbers within"):
            label_decision.check_decision({**decision, "readout": broken}, ["a", "b"])
    broken = {**good, "weights": {**good["weights"], "a": "not base64!"}}
    with pytest.raises(ValueError, match="read-out's weights"):
        label_decision.check_decision({**decision, "readout": broken}, ["a", "b"])


def test_the_readout_weighs_in_the_decision():
    decision = {"field": "f", "bias": {}, "lm_weight": 1.0, "vote_weight": 0.0,
                "readout_weight": 2.0}  # fmt: skip
    index, scores = label_decision.decide([0.0, -0.1], ["a", "b"], decision, readout=[0.0, 1.0])
    assert index == 1 and scores[1] > scores[0]
    assert label_decision.decide([0.0, -0.1], ["a", "b"], decision)[0] == 0
