"""Pausing fit at a batch boundary (``program.pause_requested``) and going on from there
(``fit(resume_from=...)``) with the program saved and loaded in between: the remaining
batches, candidates, epoch logs (rewards and metrics of the epoch paused in) and the final
program are those of a fit never paused, and a paused fit ends no training."""

from __future__ import annotations

import json

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import build_program, dataset, few_shot_learner
from tests.engine.helpers_events import EventRecorder
from training.engine.trainers.candidate_scores import MAX_SAVED_SCORES
from training.engine.trainers.pause_point import PausePoint

FIT = {"validation_split": 0.3, "epochs": 3, "batch_size": 2, "seed": 5}


class PauseAt(synalinks.callbacks.Callback):
    """Asks for a pause at the end of batch ``batch`` of epoch ``epoch`` (as Pause would)."""

    def __init__(self, epoch, batch):
        super().__init__()
        self.at = (epoch, batch)
        self.epoch = 0

    async def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    async def on_batch_end(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            self.program.pause_requested = True


async def compiled():
    program = await build_program(few_shot_learner())
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(seed=0, nb_candidates=2),
        metrics=[synalinks.metrics.F1Score(in_mask=["answer"])],
    )
    return program


def scored(recorder):
    return [
        (e["candidate_id"], e["epoch"], e["reward"], e["status"]) for e in recorder.of("candidate")
    ]


async def test_a_fit_paused_inside_an_epoch_goes_on_to_the_same_end(tmp_path):
    x, y = dataset()
    straight = await compiled()
    straight_events = EventRecorder()
    history = await straight.fit(x, y, callbacks=[straight_events], **FIT)

    program = await compiled()
    first = EventRecorder()
    await program.fit(x, y, callbacks=[first, PauseAt(1, 0)], **FIT)
    point = program.paused_at
    assert (point.epoch, point.batch, len(point.rewards)) == (1, 1, 2)
    (paused,) = first.of("paused")
    assert paused["point"] == point.to_json()
    assert not first.of("train_end")  # a paused fit ends no training: no best assigned
    assert all(e["status"] != "best" for e in first.of("candidate"))

    path = tmp_path / "paused.json"
    program.save(path)
    resumed = synalinks.Program.load(path)
    for module in resumed.modules:  # a fake's responder is code: not in the saved program
        if getattr(module, "language_model", None) is not None:
            module.language_model = few_shot_learner()
    rest = EventRecorder()
    resumed_history = await resumed.fit(x, y, callbacks=[rest], resume_from=paused["point"], **FIT)
    assert resumed.paused_at is None
    batches = [(e["epoch"], e["batch"]) for e in rest.of("batch_end")]
    assert batches[0] == (1, 1)  # the next batch, not the epoch again
    assert (
        batches
        == [(e["epoch"], e["batch"]) for e in straight_events.of("batch_end")][-len(batches) :]
    )
    assert scored(first) + scored(rest) == scored(straight_events)
    assert resumed_history.epoch == [1, 2]
    for key in ("reward", "f1_score", "val_reward"):
        assert resumed_history.history[key] == history.history[key][1:]
    assert resumed.trainable_variables[0].value == straight.trainable_variables[0].value


async def test_a_pause_point_that_is_not_one_is_refused():
    program = await compiled()
    x, y = dataset()
    with pytest.raises(ValueError, match="epoch and batch are whole numbers"):
        await program.fit(x, y, resume_from={"epoch": -1, "batch": "2"}, **FIT)
    with pytest.raises(ValueError, match="failed at most made"):
        await program.fit(
            x, y, resume_from={"epoch": 1, "batch": 1, "predictions": {"made": 1, "failed": 2}}
        )
    with pytest.raises(ValueError, match="resumes epoch 1"):
        await program.fit(x, y, resume_from=PausePoint(1, 1), initial_epoch=2, **FIT)


@synalinks.saving.register_synalinks_serializable(package="tests")
class SeedAgain(synalinks.optimizers.RandomFewShot):
    """RandomFewShot that also proposes the seed's values again at every epoch end (as an
    operator that gives its parent back would), and counts its scorings: the validation
    scorer's calls, each one a pass of LM calls over the scoring set."""

    def __init__(self, **config):
        super().__init__(**config)
        self.scorings = 0

    def attach(self, program, callbacks, scorer, seed=None):
        super().attach(program, callbacks, scorer, seed)
        score_examples = scorer.score_examples

        async def counted(values):
            self.scorings += 1
            return await score_examples(values)

        scorer.score_examples = counted

    async def propose(self, epoch):
        groups = await super().propose(epoch)
        candidate_id = self.new_candidate_id()
        again = []
        for variable in self.trainable_variables:
            seed = next(c for c in variable.candidates if c["operation"] == "seed")
            again.append(
                (
                    variable,
                    self.add_candidate(
                        variable, seed["value"], "few_shot", [seed["id"]], candidate_id
                    ),
                )
            )
        return [*groups, again]


async def seed_again_program():
    program = await build_program(few_shot_learner())
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=SeedAgain(seed=0, nb_candidates=2),
    )
    return program


async def paused_then_loaded(tmp_path, x, y, fit=FIT):
    """A fit paused at the first batch of epoch 1, saved and loaded: (the paused program,
    the loaded one, the point)."""
    program = await seed_again_program()
    first = EventRecorder()
    await program.fit(x, y, callbacks=[first, PauseAt(1, 0)], **fit)
    path = tmp_path / "paused.json"
    program.save(path)
    resumed = synalinks.Program.load(path)
    resumed.modules[-1].language_model = few_shot_learner()
    return program, resumed, program.paused_at, first


async def test_a_resumed_fit_does_not_score_again_what_it_scored_before_the_pause(tmp_path):
    x, y = dataset()
    straight = await seed_again_program()
    straight_events = EventRecorder()
    await straight.fit(x, y, callbacks=[straight_events], **FIT)

    paused, resumed, point, first = await paused_then_loaded(tmp_path, x, y)
    rest = EventRecorder()
    await resumed.fit(x, y, callbacks=[rest], resume_from=point, **FIT)
    # The seed's values, proposed again after the pause, are not scored again: no more
    # scoring passes (LM calls) than the fit never paused, and the same rewards.
    assert paused.optimizer.scorings + resumed.optimizer.scorings == straight.optimizer.scorings
    assert scored(first) + scored(rest) == scored(straight_events)
    assert resumed.trainable_variables[0].value == straight.trainable_variables[0].value


async def test_saved_rewards_are_reused_only_on_the_same_scoring_set(tmp_path):
    """Resumed on another validation set, the saved rewards are not that set's: it scores as
    a resume whose state saved none."""
    x, y = dataset()
    other = {**FIT, "validation_split": 0.4}
    _, resumed, point, _ = await paused_then_loaded(tmp_path, x, y)
    await resumed.fit(x, y, resume_from=point, **other)

    _, without, point, _ = await paused_then_loaded(tmp_path, x, y)
    state = without.optimizer.get_state()
    state["candidate_scores"] = {}
    without.optimizer.set_state(state)
    await without.fit(x, y, resume_from=point, **other)
    assert resumed.optimizer.scorings == without.optimizer.scorings > 0


async def test_the_saved_rewards_are_the_latest_max_saved_scores():
    """A state keeps at most ``MAX_SAVED_SCORES`` rewards, the latest scored: another
    optimizer given it scores again only the older ones."""
    variable = synalinks.Variable(
        {"instructions": ""},
        name="m/state",
        schema={"type": "object", "properties": {"instructions": {"type": "string"}}},
    )
    scorings = []

    async def scorer(values):
        scorings.append(values["m/state"]["instructions"])
        return 0.5

    scorer.scoring_set_key = "0" * 64
    total = MAX_SAVED_SCORES + 10
    values = [{"m/state": {"instructions": f"rule {n}"}} for n in range(total)]
    first = synalinks.optimizers.Optimizer(seed=0)
    first.trainable_variables = [variable]
    first.attach(None, None, scorer)
    for value in values:
        await first.score(value)
    state = json.loads(json.dumps(first.get_state()))  # as a document stores it
    assert len(state["candidate_scores"]["scores"]) == MAX_SAVED_SCORES

    again = synalinks.optimizers.Optimizer(seed=0)
    again.set_state(state)
    again.trainable_variables = [variable]
    again.attach(None, None, scorer)
    scorings.clear()
    for value in values:
        assert await again.score(value) == 0.5
    assert scorings == [f"rule {n}" for n in range(total - MAX_SAVED_SCORES)]


async def test_a_fresh_fit_of_a_loaded_program_scores_afresh(tmp_path):
    """Saved rewards serve a resume only: a loaded program fitted from the start (its models
    may have been changed since) scores as a program never fitted."""
    x, y = dataset()
    _, loaded, _, _ = await paused_then_loaded(tmp_path, x, y)
    await loaded.fit(x, y, **FIT)
    fresh = await seed_again_program()
    await fresh.fit(x, y, **FIT)
    assert loaded.optimizer.scorings == fresh.optimizer.scorings
