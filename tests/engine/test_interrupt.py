"""program.interrupt(): fit, evaluate and predict stop within about one LM call, in every phase.

No new prediction starts, the pending ones (in flight included) are cancelled, and each entry
point returns what had completed. ``stop_training`` keeps its Keras meaning (after the batch).
"""

import asyncio
import threading
import time

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, build_program, dataset
from training.engine.testing import FakeLanguageModel

QUESTIONS = list(TRUTH)
HANG = 3600.0  # an LM call that would never finish within a test


class Provider:
    """Answers right at once for the first ``fast`` questions, then hangs; counts the calls
    that started and the ones that were cancelled in flight."""

    def __init__(self, fast: int):
        self.fast = set(QUESTIONS[:fast])
        self.started = 0
        self.cancelled = 0

    async def __call__(self, request):
        self.started += 1
        query = request.inputs["query"]
        if query not in self.fast:
            try:
                await asyncio.sleep(HANG)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return {"answer": TRUTH[query]}


async def compiled_program(provider, max_concurrency=2):
    lm = FakeLanguageModel(responder=provider, max_concurrency=max_concurrency)
    program = await build_program(lm)
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]))
    return program


def interrupt_soon(program, delay=0.3):
    asyncio.get_running_loop().call_later(delay, program.interrupt)


async def test_evaluate_returns_the_completed_batches_and_cancels_the_rest():
    provider = Provider(fast=5)
    program = await compiled_program(provider)
    x, y = dataset(10)
    interrupt_soon(program)
    started = time.perf_counter()
    logs = await program.evaluate(x, y, batch_size=5)
    assert time.perf_counter() - started < 2.0
    assert logs["reward"] == 1.0  # the first batch (all right), not the hung second one
    # the second batch: two calls in flight (max_concurrency) were cancelled, three never began
    assert provider.started == 5 + 2
    assert provider.cancelled == 2


async def test_predict_returns_the_outputs_of_the_completed_batches():
    provider = Provider(fast=4)
    program = await compiled_program(provider)
    x, _ = dataset(10)
    interrupt_soon(program)
    predictions = await program.predict(x, batch_size=4)
    assert [p.answer for p in predictions] == [TRUTH[q] for q in QUESTIONS[:4]]
    assert provider.cancelled == 2


async def test_fit_stops_during_a_training_batch():
    provider = Provider(fast=0)
    program = await compiled_program(provider)
    x, y = dataset(10)
    ends = []

    class TrainEnd(synalinks.callbacks.Callback):
        async def on_event(self, event):
            if event["type"] == "train_end":
                ends.append(event)

    interrupt_soon(program)
    started = time.perf_counter()
    history = await program.fit(x, y, epochs=3, batch_size=5, callbacks=[TrainEnd()])
    assert time.perf_counter() - started < 2.0
    assert history.history.get("reward", []) == []  # no epoch completed
    assert [event["stopped"] for event in ends] == [True]
    assert provider.cancelled == 2


async def test_fit_stops_during_its_validation():
    provider = Provider(fast=8)  # training (first 8) answers, the 2 validation examples hang
    program = await compiled_program(provider)
    x, y = dataset(10)
    interrupt_soon(program, delay=0.5)
    started = time.perf_counter()
    history = await program.fit(x, y, epochs=2, batch_size=4, validation_split=0.2, shuffle=False)
    assert time.perf_counter() - started < 2.5
    assert history.history.get("val_reward", []) == []
    assert provider.cancelled >= 1


async def test_interrupt_from_another_thread():
    provider = Provider(fast=0)
    program = await compiled_program(provider)
    x, y = dataset(10)
    timer = threading.Timer(0.3, program.interrupt)
    timer.start()
    started = time.perf_counter()
    await program.evaluate(x, y, batch_size=10)
    assert time.perf_counter() - started < 2.0
    assert provider.cancelled == 2


async def test_an_interrupted_program_stays_stopped_until_reset():
    provider = Provider(fast=10)
    program = await compiled_program(provider)
    x, y = dataset(10)
    program.interrupt()
    assert len(await program.predict(x, batch_size=5)) == 0
    assert provider.started == 0
    program.interrupted = False
    assert len(await program.predict(x, batch_size=5)) == 10
