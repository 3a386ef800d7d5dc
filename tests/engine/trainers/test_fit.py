"""compile / fit / evaluate: history, validation, shuffle, events, stop_training, resume."""

import json

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import (
    TRUTH,
    Answer,
    Query,
    build_program,
    dataset,
    few_shot_learner,
    oracle_lm,
)
from tests.engine.helpers_events import CANDIDATE_EVENT_KEYS
from training.engine.testing import FakeLanguageModel


class Recorder(synalinks.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.calls = []
        self.events = []

    async def on_train_begin(self, logs=None):
        self.calls.append("train_begin")

    async def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(f"epoch_begin:{epoch}")

    async def on_batch_end(self, batch, logs=None):
        self.calls.append(f"batch_end:{batch}")

    async def on_epoch_end(self, epoch, logs=None):
        self.calls.append(f"epoch_end:{epoch}")

    async def on_train_end(self, logs=None):
        self.calls.append("train_end")

    async def on_event(self, event):
        json.dumps(event)  # every event is JSON-serialisable
        self.events.append(event)


def compiled(program, **optimizer_kwargs):
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(**optimizer_kwargs),
        metrics=[synalinks.metrics.F1Score(in_mask=["answer"])],
    )
    return program


async def test_evaluate_returns_reward_and_metrics():
    program = compiled(await build_program(oracle_lm()))
    x, y = dataset()
    result = await program.evaluate(x, y, batch_size=4)
    assert result == {"reward": 1.0, "f1_score": 1.0}


async def test_evaluate_requires_compile():
    program = await build_program(oracle_lm())
    with pytest.raises(RuntimeError, match="compile"):
        await program.evaluate(*dataset())


async def test_fit_history_and_events():
    program = compiled(await build_program(oracle_lm()))
    x, y = dataset()
    recorder = Recorder()
    history = await program.fit(
        x, y, validation_split=0.2, epochs=2, batch_size=4, callbacks=[recorder], seed=1
    )
    assert set(history.history) == {"reward", "f1_score", "val_reward", "val_f1_score"}
    assert history.history["reward"] == [1.0, 1.0] and history.history["val_reward"] == [1.0, 1.0]
    assert history.params["samples"] == 8 and history.params["validation_samples"] == 2
    assert recorder.calls == [
        "train_begin",
        "epoch_begin:0",
        "batch_end:0",
        "batch_end:1",
        "epoch_end:0",
        "epoch_begin:1",
        "batch_end:0",
        "batch_end:1",
        "epoch_end:1",
        "train_end",
    ]
    types = [e["type"] for e in recorder.events]
    assert (
        types.count("epoch_begin") == 2
        and types.count("batch_end") == 4
        and types.count("epoch_end") == 2
    )
    batch_end = next(e for e in recorder.events if e["type"] == "batch_end")
    assert set(batch_end) >= {"epoch", "batch", "batches", "logs"} and batch_end["batches"] == 2
    candidates = [e for e in recorder.events if e["type"] == "candidate"]
    assert candidates and CANDIDATE_EVENT_KEYS <= set(candidates[0])
    assert candidates[0]["operation"] == "seed" and candidates[-1]["status"] == "best"
    assert history.usage["calls"] > 0


async def test_each_fit_moment_sends_its_hook_and_its_event_together():
    """docs/ARCHITECTURE.md, "Events": fit's events come with their hooks, in this order."""

    class Interleaved(synalinks.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seen = []

        async def on_train_begin(self, logs=None):
            self.seen.append("hook:train_begin")

        async def on_epoch_begin(self, epoch, logs=None):
            self.seen.append("hook:epoch_begin")

        async def on_batch_begin(self, batch, logs=None):
            self.seen.append("hook:batch_begin")

        async def on_batch_end(self, batch, logs=None):
            self.seen.append("hook:batch_end")

        async def on_epoch_end(self, epoch, logs=None):
            self.seen.append("hook:epoch_end")

        async def on_train_end(self, logs=None):
            self.seen.append("hook:train_end")

        async def on_event(self, event):
            if event["type"] not in ("candidate", "selection"):  # the optimizer's own
                self.seen.append(f"event:{event['type']}")

    program = compiled(await build_program(oracle_lm()))
    x, y = dataset(4)
    callback = Interleaved()
    await program.fit(x, y, epochs=1, batch_size=2, callbacks=[callback], seed=1)
    batch = ["hook:batch_begin", "hook:batch_end", "event:batch_end"]
    assert callback.seen == [
        "hook:train_begin",
        "event:train_begin",
        "event:epoch_begin",
        "hook:epoch_begin",
        *batch,
        *batch,
        "hook:epoch_end",
        "event:epoch_end",
        "hook:train_end",
        "event:train_end",
    ]


async def test_validation_data_and_bad_split():
    program = compiled(await build_program(oracle_lm()))
    x, y = dataset()
    history = await program.fit(
        x[:6], y[:6], validation_data=(x[6:], y[6:]), epochs=1, batch_size=3
    )
    assert history.params["validation_samples"] == 4
    with pytest.raises(ValueError, match="validation_split"):
        await program.fit(x, y, validation_split=1.5)
    with pytest.raises(Exception, match="y has 3 items but x has 10"):
        await program.fit(x, y[:3])


async def test_shuffle_is_seeded_and_real():
    async def order_of(seed, shuffle=True):
        lm = oracle_lm()
        lm.record_requests = True
        program = compiled(await build_program(lm))
        x, y = dataset()
        await program.fit(x, y, epochs=2, batch_size=10, shuffle=shuffle, seed=seed)
        # the first 20 requests are the two epochs' training predictions (memo off: seeds differ)
        return [r.inputs["query"] for r in lm.requests]

    first = await order_of(7)
    assert first == await order_of(7)
    assert first != await order_of(8)
    assert first[:10] != list(TRUTH)  # really shuffled
    assert (await order_of(7, shuffle=False))[:10] == list(TRUTH)


async def test_stop_training_after_current_batch():
    class StopAfterFirstBatch(synalinks.callbacks.Callback):
        async def on_batch_end(self, batch, logs=None):
            self.program.stop_training = True

    lm = oracle_lm()
    program = compiled(await build_program(lm))
    x, y = dataset()
    recorder = Recorder()
    history = await program.fit(
        x, y, epochs=3, batch_size=2, callbacks=[StopAfterFirstBatch(), recorder]
    )
    assert [c for c in recorder.calls if c.startswith("batch_end")] == ["batch_end:0"]
    assert history.history == {} and lm.calls == 2
    assert recorder.events[-1]["type"] == "train_end" and recorder.events[-1]["stopped"] is True


async def test_progress_bar_and_checkpoint_and_early_stopping(tmp_path, capsys):
    program = compiled(await build_program(oracle_lm()))
    x, y = dataset()
    checkpoint = synalinks.callbacks.ProgramCheckpoint(
        filepath=str(tmp_path / "best_model.json"),
        monitor="val_reward",
        mode="max",
        save_best_only=True,
    )
    stopper = synalinks.callbacks.EarlyStopping(monitor="val_reward", patience=1)
    history = await program.fit(
        x,
        y,
        validation_split=0.2,
        epochs=10,
        batch_size=4,
        callbacks=[checkpoint, stopper, synalinks.callbacks.ProgressBar()],
    )
    assert len(history.epoch) == 3  # no improvement after epoch 0: stops after patience 1
    assert checkpoint.saved == [str(tmp_path / "best_model.json")]
    restored = synalinks.Program.load(tmp_path / "best_model.json")
    # The oracle scores 1.0 from the first batch, so no candidate beats the initial variables:
    # the checkpoint of epoch 0 and the program after fit hold the same, untouched state.
    assert restored.get_variables() == program.get_variables()
    assert [v.value for v in program.trainable_variables] == [{"instructions": "", "examples": []}]
    err = capsys.readouterr().err
    assert "Epoch 1/10" in err and "val_reward" in err


async def test_failures_during_fit_are_counted_not_fatal():
    lm = FakeLanguageModel(
        responses={q: {"answer": a} for q, a in TRUTH.items()},
        failure_rate=0.3,
        failure="garbage",
        seed=3,
    )
    program = compiled(await build_program(lm))
    x, y = dataset()
    recorder = Recorder()
    with synalinks.usage.track() as usage:
        history = await program.fit(x, y, epochs=1, batch_size=5, callbacks=[recorder])
    failures = sum(e["failures"] for e in recorder.events if e["type"] == "batch_end")
    assert failures > 0 and history.history["reward"][0] == pytest.approx(1 - failures / 10)
    assert (
        usage.calls > 10
        and usage.parse_failures >= failures
        and usage.failures == usage.parse_failures
    )


async def test_resume_with_initial_epoch_from_saved_state(tmp_path):
    x, y = dataset()
    program = compiled(await build_program(few_shot_learner()), seed=0)
    await program.fit(x, y, validation_split=0.3, epochs=1, batch_size=4, seed=5)
    path = tmp_path / "run.json"
    program.save(path)
    resumed = synalinks.Program.load(path)
    assert resumed.optimizer.candidate_count == program.optimizer.candidate_count
    assert resumed.optimizer.example_pool == program.optimizer.example_pool
    recorder = Recorder()
    history = await resumed.fit(
        x,
        y,
        validation_split=0.3,
        epochs=3,
        batch_size=4,
        initial_epoch=1,
        seed=5,
        callbacks=[recorder],
    )
    assert history.epoch == [1, 2]
    ids = [e["candidate_id"] for e in recorder.events if e["type"] == "candidate"]
    assert "c1" not in ids[:-1]  # earlier candidates are kept, not re-created


async def test_unreachable_lm_stops_fit_with_clear_error():
    lm = FakeLanguageModel(
        failure_rate=1.0, failure="unreachable", retries=0, api_base="http://nowhere:1"
    )
    program = compiled(await build_program(lm))
    with pytest.raises(synalinks.LanguageModelUnreachable, match="nowhere:1"):
        await program.fit(*dataset(), epochs=1)


async def test_usage_track_around_fit():
    # Seeded: an unseeded draw repeats epoch 1's example set about once in 60 fits, and a
    # repeated set is not scored again
    program = compiled(await build_program(oracle_lm()), seed=0)
    with synalinks.usage.track() as usage:
        await program.fit(*dataset(), epochs=2, batch_size=5)
    # 10 training predictions with the starting variables + one new candidate scored on the 10
    # examples per epoch; the seed's scoring and epoch 2's training predictions are memoised
    assert usage.calls == 30 and usage.memo_hits == 20 and usage.prompt_tokens == 300


async def test_fit_runs_an_overridden_train_step_once_per_batch():
    """``train_step`` is fit's public override point (as Keras's): a subclass sees every batch
    and what it returns makes the epoch's reward."""
    seen = []

    class HalvedProgram(synalinks.Program):
        async def train_step(self, batch, batch_x, batch_y, indices=None):
            rewards, failures = await super().train_step(batch, batch_x, batch_y, indices)
            seen.append((batch, list(indices)))
            return [reward / 2 for reward in rewards], failures

    inputs = synalinks.Input(data_model=Query)
    outputs = await synalinks.Generator(data_model=Answer, language_model=oracle_lm())(inputs)
    program = compiled(HalvedProgram(inputs=inputs, outputs=outputs))
    x, y = dataset()
    history = await program.fit(x, y, epochs=1, batch_size=4, shuffle=False)
    assert seen == [(0, [0, 1, 2, 3]), (1, [4, 5, 6, 7]), (2, [8, 9])]
    assert history.history["reward"] == [0.5]
