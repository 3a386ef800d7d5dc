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
IN_FLIGHT = 2  # the programs' max_concurrency: calls in flight at once


class Provider:
    """Answers right at once for the first ``fast`` questions, then hangs; counts the calls
    that started and the ones that were cancelled in flight. ``hanging`` (and, for a thread,
    ``hanging_seen``) is set once IN_FLIGHT calls hang at once."""

    def __init__(self, fast: int):
        self.fast = set(QUESTIONS[:fast])
        self.started = 0
        self.cancelled = 0
        self.hung = 0
        self.hanging = asyncio.Event()
        self.hanging_seen = threading.Event()

    async def __call__(self, request):
        self.started += 1
        query = request.inputs["query"]
        if query not in self.fast:
            self.hung += 1
            if self.hung == IN_FLIGHT:
                self.hanging.set()
                self.hanging_seen.set()
            try:
                await asyncio.sleep(HANG)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return {"answer": TRUTH[query]}


async def compiled_program(provider, max_concurrency=IN_FLIGHT):
    lm = FakeLanguageModel(responder=provider, max_concurrency=max_concurrency)
    program = await build_program(lm)
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]))
    return program


def interrupt_once_hanging(program, provider) -> asyncio.Future:
    """``program.interrupt()`` from the loop once IN_FLIGHT calls hang (not after a delay that
    a loaded machine may overrun before any call starts)."""

    async def interrupt():
        try:
            await asyncio.wait_for(provider.hanging.wait(), 10)
        finally:
            program.interrupt()  # also when they never hung: the test fails, it does not hang

    return asyncio.ensure_future(interrupt())


async def test_evaluate_returns_the_completed_batches_and_cancels_the_rest():
    provider = Provider(fast=5)
    program = await compiled_program(provider)
    x, y = dataset(10)
    interrupting = interrupt_once_hanging(program, provider)
    started = time.perf_counter()
    logs = await program.evaluate(x, y, batch_size=5)
    await interrupting  # it fired once the calls hung (TimeoutError had they never)
    assert time.perf_counter() - started < 2.0
    assert logs["reward"] == 1.0  # the first batch (all right), not the hung second one
    # the second batch: two calls in flight (max_concurrency) were cancelled, three never began
    assert provider.started == 5 + 2
    assert provider.cancelled == 2


async def test_predict_returns_the_outputs_of_the_completed_batches():
    provider = Provider(fast=4)
    program = await compiled_program(provider)
    x, _ = dataset(10)
    interrupting = interrupt_once_hanging(program, provider)
    predictions = await program.predict(x, batch_size=4)
    await interrupting  # it fired once the calls hung (TimeoutError had they never)
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

    interrupting = interrupt_once_hanging(program, provider)
    started = time.perf_counter()
    history = await program.fit(x, y, epochs=3, batch_size=5, callbacks=[TrainEnd()])
    await interrupting  # it fired once the calls hung (TimeoutError had they never)
    assert time.perf_counter() - started < 2.0
    assert history.history.get("reward", []) == []  # no epoch completed
    assert [event["stopped"] for event in ends] == [True]
    assert provider.cancelled == 2


async def test_fit_stops_during_its_validation():
    provider = Provider(fast=8)  # training (first 8) answers, the 2 validation examples hang
    program = await compiled_program(provider)
    x, y = dataset(10)
    interrupting = interrupt_once_hanging(program, provider)
    started = time.perf_counter()
    history = await program.fit(x, y, epochs=2, batch_size=4, validation_split=0.2, shuffle=False)
    await interrupting  # it fired once the calls hung (TimeoutError had they never)
    assert time.perf_counter() - started < 2.5
    assert history.history.get("val_reward", []) == []
    assert provider.cancelled >= 1


async def test_interrupt_from_another_thread():
    provider = Provider(fast=0)
    program = await compiled_program(provider)
    x, y = dataset(10)
    interrupter = threading.Thread(
        target=lambda: (provider.hanging_seen.wait(10), program.interrupt())
    )
    interrupter.start()
    started = time.perf_counter()
    await program.evaluate(x, y, batch_size=10)
    interrupter.join(10)
    assert provider.hanging_seen.is_set()
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
