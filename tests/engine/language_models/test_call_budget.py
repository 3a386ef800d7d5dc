"""CallBudget: no LM call starts that a cap cannot afford; fit/evaluate/predict stop cleanly.

Every test counts what the scripted provider really received (``lm.calls``: requests that
reached it, retries included) and what usage recorded, and holds both to the cap.
"""

import asyncio
import time

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, build_program, dataset, oracle_lm
from tests.engine.optimizers.test_omega import make_omega, mutation_lm, phrase_learner
from training.engine.language_models import budget as budget_mod
from training.engine.testing import FakeLanguageModel


async def compiled(lm, optimizer=None):
    program = await build_program(lm)
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    return program


async def test_concurrent_calls_never_pass_the_calls_cap():
    lm = oracle_lm(max_concurrency=8, latency=0.05)
    program = await compiled(lm)
    x, y = dataset(10)
    budget = synalinks.CallBudget(calls=3)
    with synalinks.usage.track() as usage, budget.applied():
        logs = await program.evaluate(x, y, batch_size=10)
    assert lm.calls == 3  # eight started at once would have been 8
    assert usage.calls == 3 and budget.used_calls == 3
    assert isinstance(program.budget_exhausted, synalinks.BudgetExhausted)
    assert program.budget_exhausted.cap == "calls"
    assert logs["reward"] == 0.0  # the refused batch is dropped, like an interrupted one


async def test_every_retry_counts_against_the_cap():
    lm = FakeLanguageModel(failure_rate=0.7, failure="error", seed=3, retries=3)
    program = await compiled(lm)
    x, _ = dataset(10)
    budget = synalinks.CallBudget(calls=5)
    with synalinks.usage.track() as usage, budget.applied():
        await program.predict(x, batch_size=1)
    assert lm.calls == 5
    assert usage.calls == 5  # failed attempts are calls in usage too
    assert usage.failures >= 3  # retries really happened within the five
    assert program.budget_exhausted.cap == "calls"


async def test_the_token_cap_is_never_passed():
    # each call reports 400 tokens; the bound reserved is larger (prompt bytes + max_tokens)
    lm = oracle_lm(prompt_tokens=300, completion_tokens=100, max_tokens=64, max_concurrency=4)
    program = await compiled(lm)
    x, y = dataset(10)
    cap = 2_000
    budget = synalinks.CallBudget(tokens=cap)
    with synalinks.usage.track() as usage, budget.applied():
        await program.evaluate(x, y, batch_size=4)
    assert usage.total_tokens <= cap
    assert budget.used_tokens == usage.total_tokens
    assert usage.calls >= 1  # it did spend, up to what a call's bound allowed
    assert program.budget_exhausted.cap == "tokens"


async def test_the_cost_cap_is_never_passed():
    lm = oracle_lm(cost_per_call=0.01, max_concurrency=8)
    program = await compiled(lm)
    x, y = dataset(10)
    budget = synalinks.CallBudget(cost=0.035)
    with synalinks.usage.track() as usage, budget.applied():
        await program.evaluate(x, y, batch_size=10)
    assert usage.calls == 3
    assert usage.cost <= 0.035


async def test_the_time_cap_cuts_a_call_in_flight():
    lm = oracle_lm(latency=5.0, max_concurrency=2)
    program = await compiled(lm)
    x, y = dataset(4)
    budget = synalinks.CallBudget(seconds=0.5)
    started = time.perf_counter()
    with budget.applied():
        await program.evaluate(x, y, batch_size=4)
    assert time.perf_counter() - started < 1.0  # not 5 s: the deadline cancelled the calls
    assert program.budget_exhausted.cap == "seconds"


async def test_a_capped_fit_stops_cleanly_and_keeps_its_best_candidates():
    lm = oracle_lm(max_concurrency=4)
    program = await compiled(lm, synalinks.optimizers.RandomFewShot())
    x, y = dataset(10)
    ends = []

    class TrainEnd(synalinks.callbacks.Callback):
        async def on_event(self, event):
            if event["type"] == "train_end":
                ends.append(event)

    budget = synalinks.CallBudget(calls=7)
    with synalinks.usage.track() as usage, budget.applied():
        history = await program.fit(x, y, epochs=3, batch_size=5, callbacks=[TrainEnd()])
    assert usage.calls <= 7 and lm.calls <= 7
    assert [event["stopped"] for event in ends] == [True]
    assert program.budget_exhausted.cap == "calls"
    assert history.usage["calls"] <= 7


async def test_a_held_amount_is_left_for_what_comes_after():
    lm = oracle_lm(max_concurrency=4)
    program = await compiled(lm)
    x, y = dataset(10)
    budget = synalinks.CallBudget(calls=8)
    with budget.applied():
        with budget.holding(calls=4):
            await program.fit(x, y, epochs=5, batch_size=2)
        assert budget.used_calls <= 4  # fit stopped short of the held four
        logs = await program.evaluate(x[:4], y[:4], batch_size=4)
    assert program.budget_exhausted is None  # the held calls paid for the evaluation
    assert logs["reward"] == 1.0
    assert budget.used_calls <= 8


async def test_an_optimizer_that_survives_errors_does_not_swallow_the_stop():
    # OMEGA survives a failed mutation call (``except Exception``) and runs its step while
    # fit predicts the next batch: the refusal must still stop fit, and nothing pass the cap.
    mutations = mutation_lm()
    task = phrase_learner()
    program = await compiled(task, make_omega(mutations))
    x, y = dataset(10)
    budget = synalinks.CallBudget(calls=12)
    with synalinks.usage.track() as usage, budget.applied():
        await program.fit(x, y, epochs=3, batch_size=4)
    assert usage.calls <= 12 and task.calls + mutations.calls <= 12
    assert mutations.calls >= 1  # the optimizer's own calls were in the budget too
    assert program.budget_exhausted.cap == "calls"


async def test_nested_budgets_each_hold_and_nothing_is_reserved_when_one_refuses():
    outer, inner = synalinks.CallBudget(calls=10), synalinks.CallBudget(calls=2)
    lm = oracle_lm()
    program = await compiled(lm)
    x, _ = dataset(5)
    with outer.applied(), inner.applied():
        await program.predict(x, batch_size=1)
    assert lm.calls == 2 and outer.used_calls == 2 and inner.used_calls == 2
    assert outer.left("calls") == 8  # the refused call reserved nothing in the outer budget


async def test_no_budget_means_no_reservation():
    assert budget_mod.reserve_for(lambda: (1, 10, 0.0)) is None
    lm = oracle_lm(max_concurrency=8)
    program = await compiled(lm)
    x, _ = dataset(10)
    outputs = await program.predict(x, batch_size=10)
    assert [o.answer for o in outputs] == list(TRUTH.values())


async def test_reservations_are_atomic_across_many_tasks():
    budget = synalinks.CallBudget(calls=50)
    refused = 0

    async def one():
        nonlocal refused
        try:
            reservation = budget_mod.reserve(1, 0, 0.0)
        except synalinks.BudgetExhausted:
            refused += 1
            return
        await asyncio.sleep(0)  # a yield, not a wait: the other calls reserve meanwhile
        reservation.settle()

    with budget.applied():
        await asyncio.gather(*(one() for _ in range(200)))
    assert budget.used_calls == 50 and refused == 150
