"""The forecast's counting rule against real counted runs on the fake LM.

Each test runs what a dashboard run does (test evaluations, fit, test evaluations, sample
answers) inside ``usage.track()`` and compares the calls it paid with ``forecast.count_calls``:
exact where the configuration decides, and exact too once told the two things the answers
decide (how many candidates were scored, how often a new best started an epoch)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, Answer, Query, build_program, few_shot_learner
from training.engine.callbacks import Callback
from training.engine.optimizers import OMEGA, RandomFewShot
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel
from training.forecasting import forecast

ITEMS = list(TRUTH.items())
# Ten questions then two repeats (the memo pays a repeated input once per variable values).
ROWS = ITEMS + ITEMS[:2]
TEST = ITEMS[2:6]


def arrays(rows):
    x = np.array([Query(query=q) for q, _ in rows], dtype="object")
    y = np.array([Answer(answer=a) for _, a in rows], dtype="object")
    return x, y


class Observer(Callback):
    """Records what the answers decided: new candidate values scored (a value scored before is
    a memo hit), epochs started under a new best."""

    def __init__(self):
        super().__init__()
        self.scored = 0
        self.values: set[str] = set()
        self.training_states: list[str] = []
        self.seen: set[str] = set()
        self.new_states = 0
        self.contenders = 0

    def _state(self) -> str:
        return "|".join(variable.hash for variable in self.program.trainable_variables)

    async def on_train_begin(self, logs=None):
        self.seen = {self._state()}

    async def on_epoch_end(self, epoch, logs=None):
        state = self._state()  # the next epoch trains under it
        if epoch + 1 < self.params["epochs"] and state not in self.seen:
            self.new_states += 1
            self.seen.add(state)

    async def on_event(self, event):
        if event["type"] == "final_selection":
            self.contenders += len(event["contenders"])
        if event["type"] != "candidate" or event["status"] != "scored":
            return
        value = forecast.canonical(event["value"])
        if value not in self.values:
            self.values.add(value)
            self.scored += event["operation"] != "seed"


async def counted_run(
    program,
    *,
    epochs,
    batch_size,
    validation_split,
    before=1,
    after=1,
    samples=2,
    selection_split=0.0,
):
    x, y = arrays(ROWS)
    x_test, y_test = arrays(TEST)
    observer = Observer()
    with synalinks.usage.track() as usage:
        for _ in range(before):
            await program.evaluate(x_test, y_test, batch_size=batch_size)
        await program.fit(
            x,
            y,
            validation_split=validation_split,
            selection_split=selection_split,
            epochs=epochs,
            batch_size=batch_size,
            callbacks=[observer],
            seed=3,
        )
        for _ in range(after):
            await program.evaluate(x_test, y_test, batch_size=batch_size)
        await program.predict(x_test[:samples], batch_size=samples)
    return usage.calls, observer


def shape(**overrides) -> forecast.RunShape:
    values = {
        "train_inputs": [{"query": q} for q, _ in ROWS],
        "test_size": len(TEST),
        "epochs": 3,
        "batch_size": 4,
        "validation_split": 0.0,
        "optimizer": "RandomFewShot",
        "evaluations_before": 1,
        "evaluations_after": 1,
        "samples": 2,
    }
    values.update(overrides)
    return forecast.RunShape(**values)


async def rfs_program(lm, nb_candidates=2):
    program = await build_program(lm)
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=RandomFewShot(nb_candidates=nb_candidates, seed=1),
    )
    return program


def test_validation_cut_is_fits():
    assert forecast.validation_cut(12, 0.25) == 9
    assert forecast.validation_cut(12, 0.0) == 12
    assert forecast.validation_cut(10, 0.2) == 8


async def test_random_few_shot_without_validation_is_exact():
    """Scoring on the training set: every later epoch's training predictions are memo hits."""
    program = await rfs_program(few_shot_learner())
    calls, observer = await counted_run(program, epochs=3, batch_size=4, validation_split=0.0)
    rule = shape(nb_candidates=2)
    counted = forecast.count_calls(rule)
    assert counted.total.low <= calls <= counted.total.high
    known = forecast.count_calls(rule, scored=observer.scored)
    assert calls == known.total.low == known.total.high  # no epoch is predicted twice
    assert observer.scored <= 6  # 2 candidates × 3 epochs, a set drawn twice scored once


async def test_random_few_shot_with_validation_counts_repeats_and_new_bests():
    program = await rfs_program(few_shot_learner())
    calls, observer = await counted_run(program, epochs=3, batch_size=4, validation_split=0.25)
    rule = shape(nb_candidates=2, validation_split=0.25)
    counted = forecast.count_calls(rule)
    assert counted.total.low <= calls <= counted.total.high
    known = forecast.count_calls(rule, scored=observer.scored, best_changes=observer.new_states)
    assert calls == known.total.low == known.total.high
    # The repeats in the validation split were predicted in training under the seed values.
    distinct_train_and_val = 10
    assert known.predictions.low >= distinct_train_and_val


@pytest.mark.parametrize("optimizer", ["RandomFewShot", "OMEGA"])
async def test_selection_split_scoring_at_the_end_is_counted(optimizer):
    """The selection split (the last 3 rows: a new question and two repeats of training rows)
    scores up to TOP_K + 1 contenders after fit; the seed's repeats are memo hits."""
    if optimizer == "OMEGA":
        program = await omega_program(numbered_mutations())
        rule = shape(optimizer="OMEGA", epochs=2, batch_size=3)
    else:
        program = await rfs_program(few_shot_learner(), nb_candidates=3)
        rule = shape(nb_candidates=3, epochs=2, batch_size=3)
    rule = dataclasses.replace(rule, validation_split=0.25, selection_split=0.25)
    calls, observer = await counted_run(
        program, epochs=2, batch_size=3, validation_split=0.25, selection_split=0.25
    )
    assert observer.contenders >= 2  # the seed and at least one candidate
    counted = forecast.count_calls(rule)
    assert counted.total.low <= calls <= counted.total.high
    known = forecast.count_calls(
        rule,
        scored=observer.scored,
        best_changes=observer.new_states,
        contenders=observer.contenders,
    )
    # Each best that started an epoch is a contender here: its training repeats are memo hits.
    assert calls == known.total.low <= known.total.high
    # The seed pays the one new question; every other contender the three selection rows,
    # but a best that started an epoch only the new question.
    others = observer.contenders - 1
    trained = min(others, observer.new_states)
    assert known.selection.low == 1 + trained * 1 + (others - trained) * 3


async def test_random_few_shot_whose_best_never_changes_predicts_training_once():
    """Echo answers never earn a reward: the seed stays best, no epoch is predicted twice."""
    program = await rfs_program(FakeLanguageModel())
    calls, observer = await counted_run(program, epochs=3, batch_size=4, validation_split=0.25)
    assert observer.new_states == 0
    rule = shape(nb_candidates=2, validation_split=0.25)
    assert calls == forecast.count_calls(rule, scored=observer.scored, best_changes=0).total.low
    assert calls < forecast.count_calls(rule).total.expected  # the forecast allows for new bests


def test_a_new_best_is_expected_as_often_as_a_record_among_exchangeable_candidates():
    """Before a run the seed and its candidates are alike: epoch j's k candidates hold the best
    of the j * k + 1 values so far with chance k / (j * k + 1), rarer as training goes on."""
    assert [forecast.record_chance(1, j) for j in (1, 2, 3)] == pytest.approx([1 / 2, 1 / 3, 1 / 4])
    assert forecast.record_chance(4, 4) == pytest.approx(4 / 5)  # more candidates, likelier
    assert forecast.record_chance(0, 1) == 0
    pool = [{"query": f"question {i}"} for i in range(400)]  # no draw repeats: 1 set an epoch
    rule = shape(train_inputs=pool, epochs=10, nb_candidates=1, validation_split=0.25)
    counted = forecast.count_calls(rule)
    never = forecast.count_calls(rule, best_changes=0)
    retrain = 300  # the training rows a new best predicts again
    new_bests = sum(1 / (j + 1) for j in range(1, 10))
    assert counted.predictions.expected - never.predictions.expected == pytest.approx(
        new_bests * retrain, rel=1e-3
    )
    assert counted.predictions.high - never.predictions.high == 9 * retrain


def test_a_small_pools_new_bests_are_expected_early_as_its_new_sets_come():
    """Two training rows, one example a set: the two sets are drawn in the first epochs and
    then only repeat, so new bests are expected then (exactly, 1/2 + 1/3 for the two sets),
    not spread over all ten epochs."""
    rows = [{"query": f"question {i}"} for i in range(4)]
    rule = shape(
        train_inputs=rows,
        epochs=10,
        nb_candidates=1,
        nb_min_examples=1,
        nb_max_examples=1,
        validation_split=0.5,
    )
    retrain = 2
    new_bests = (
        forecast.count_calls(rule).predictions.expected
        - forecast.count_calls(rule, best_changes=0).predictions.expected
    ) / retrain
    assert new_bests == pytest.approx(1 / 2 + 1 / 3, rel=0.06)
    sets = forecast.expected_distinct_draws(2, 1, 1, 10)
    spread = sum(forecast.record_chance(sets / 10, sets * j / 10) for j in range(1, 10))
    assert new_bests < spread


def test_a_one_row_pool_is_drawn_once():
    assert forecast.expected_distinct_draws(1, 1, 3, 4) == 1
    rule = shape(train_inputs=[{"query": "one"}, {"query": "two"}], validation_split=0.5)
    assert forecast.count_calls(rule).candidates.expected == 1


async def test_non_deterministic_program_pays_every_prediction():
    program = await rfs_program(few_shot_learner(temperature=0.7), nb_candidates=1)
    calls, _ = await counted_run(program, epochs=2, batch_size=5, validation_split=0.25)
    counted = forecast.count_calls(
        shape(nb_candidates=1, epochs=2, batch_size=5, validation_split=0.25, deterministic=False)
    )
    assert counted.total.low == counted.total.high == calls


def numbered_mutations(same_value=False):
    """OMEGA's LM: each mutation writes new instructions (or always the same ones)."""
    counter = Counter()

    def respond(request):
        counter["calls"] += 1
        if request.module.startswith("omega_crossover"):
            # as long as its parents: a much shorter text would be refused as junk
            text = f"Answer precisely, merged version {counter['calls']}."
            return {"thinking": "merge", "instructions": text}
        text = "Route it." if same_value else f"Answer precisely, version {counter['calls']}."
        return {"thinking": "be precise", "instructions": text}

    lm = FakeLanguageModel(responder=respond, temperature=0.3)
    lm.counter = counter
    return lm


async def omega_program(mutations, task_lm=None):
    program = await build_program(task_lm or few_shot_learner(), name="router")
    program.trainable_variables[0].assign({"instructions": "Route it.", "examples": []})
    optimizer = OMEGA(
        language_model=mutations,
        embedding_model=FakeEmbeddingModel(),
        merging_rate=0.5,
        population_size=3,
        seed=0,
    )
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    return program


@pytest.mark.parametrize("validation_split", [0.0, 0.25])
async def test_omega_counts_one_optimizer_call_per_step_and_a_scoring_per_new_candidate(
    validation_split,
):
    mutations = numbered_mutations()
    program = await omega_program(mutations)
    calls, observer = await counted_run(
        program, epochs=2, batch_size=3, validation_split=validation_split
    )
    rule = shape(optimizer="OMEGA", epochs=2, batch_size=3, validation_split=validation_split)
    counted = forecast.count_calls(rule)
    steps = counted.steps * 2
    assert mutations.counter["calls"] == steps == counted.optimizer.expected
    assert counted.total.low <= calls <= counted.total.high
    known = forecast.count_calls(rule, scored=observer.scored, best_changes=observer.new_states)
    assert calls == known.total.low == known.total.high
    assert observer.scored == steps  # every mutation was new: the high end of the steps


async def test_omega_steps_that_repeat_a_value_score_nothing():
    mutations = numbered_mutations(same_value=True)
    program = await omega_program(mutations, task_lm=FakeLanguageModel())
    calls, observer = await counted_run(program, epochs=2, batch_size=3, validation_split=0.25)
    assert observer.scored == 0
    counted = forecast.count_calls(
        shape(optimizer="OMEGA", epochs=2, batch_size=3, validation_split=0.25)
    )
    assert calls == counted.total.low


def test_distinct_draws_of_a_small_pool_repeat_and_a_large_one_do_not():
    # One example from a pool of 2, drawn 4 times: 2 × (1 − (1/2)^4) distinct sets.
    assert forecast.expected_distinct_draws(2, 1, 1, 4) == pytest.approx(2 * (1 - 0.5**4))
    assert forecast.expected_distinct_draws(1000, 1, 3, 6) == pytest.approx(6, abs=0.01)
    assert forecast.expected_distinct_draws(5, 0, 0, 3) == 0  # the empty set is the seed's
    assert forecast.expected_distinct_draws(0, 1, 3, 3) == 0


def test_judge_calls_follow_every_scored_reward():
    plain = forecast.count_calls(shape(nb_candidates=1))
    judged = forecast.count_calls(shape(nb_candidates=1, judge_calls=1))
    # 3 epochs × 12 training rewards + seed scoring 12 + each candidate 12 + 2 test passes × 4
    assert judged.judge.high == 3 * 12 + 12 + 3 * 12 + 2 * 4
    assert judged.judge.expected == pytest.approx(3 * 12 + 12 + judged.candidates.expected * 12 + 8)
    assert judged.total.expected == plain.total.expected + judged.judge.expected


def test_unknown_optimizer_is_refused():
    with pytest.raises(ValueError, match="optimizer must be one of"):
        forecast.count_calls(shape(optimizer="MIPRO"))
