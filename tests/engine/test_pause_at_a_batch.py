"""Pausing fit at a batch boundary (``program.pause_requested``) and going on from there
(``fit(resume_from=...)``) with the program saved and loaded in between: the remaining
batches, candidates, epoch logs (rewards and metrics of the epoch paused in) and the final
program are those of a fit never paused, and a paused fit ends no training."""

from __future__ import annotations

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import build_program, dataset, few_shot_learner
from tests.engine.helpers_events import EventRecorder
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
    with pytest.raises(ValueError, match="resumes epoch 1"):
        await program.fit(x, y, resume_from=PausePoint(1, 1), initial_epoch=2, **FIT)
