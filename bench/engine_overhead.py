"""Engine overhead benchmark (no network, fake LM).

1. Zero-latency fake LM: predictions per second through a Generator — the framework's own cost
   (prompt building, semaphore, parsing, validation, usage). Baseline measured in the same run:
   calling the fake provider function directly, so "engine overhead" = 1/rate - 1/baseline.
   Target: >= 2,000 predictions/s.
2. 100 ms fake LM, batch of 32 at max_concurrency 8: ideal is 4 waves x 100 ms = 400 ms;
   target: <= 1.2 x 400 ms = 480 ms.

Run: .venv/bin/python bench/engine_overhead.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from query_answer import Answer, Query, query_answer_program  # noqa: E402

import training.engine as synalinks  # noqa: E402


async def throughput(n: int = 20_000) -> tuple[float, float]:
    lm = synalinks.testing.FakeLanguageModel(
        responder=lambda request: {"answer": request.inputs["query"]}
    )
    program = await query_answer_program(lm, instructions="Answer.")
    x = np.array([Query(query=f"question {i}") for i in range(n)], dtype="object")
    await program.predict(x[:256], batch_size=256)  # warm-up
    with synalinks.usage.track() as usage:
        started = time.perf_counter()
        predictions = await program.predict(x, batch_size=256)
        elapsed = time.perf_counter() - started
    assert all(p is not None for p in predictions) and usage.calls == n, usage
    # baseline: the fake provider alone (what any framework must at least pay)
    messages = [{"role": "user", "content": "{}"}]
    schema = Answer.get_schema()
    started = time.perf_counter()
    for i in range(n):
        await lm._raw_complete(messages, schema, 0.0, {"inputs": {"query": f"q{i}"}})
    baseline = time.perf_counter() - started
    return n / elapsed, n / baseline


async def latency_batch() -> float:
    lm = synalinks.testing.FakeLanguageModel(
        responder=lambda request: {"answer": "ok"}, latency=0.1, max_concurrency=8
    )
    program = await query_answer_program(lm, instructions="Answer.")
    x = np.array([Query(query=f"q{i}") for i in range(32)], dtype="object")
    started = time.perf_counter()
    predictions = await program.predict(x, batch_size=32)
    elapsed = time.perf_counter() - started
    assert all(p is not None for p in predictions)
    return elapsed


async def main() -> int:
    rate, baseline_rate = await throughput()
    overhead_us = (1 / rate - 1 / baseline_rate) * 1e6
    print(f"zero-latency predictions/s through a Generator: {rate:,.0f} (target >= 2,000)")
    print(
        f"baseline (fake provider alone): {baseline_rate:,.0f}/s; engine overhead {overhead_us:.0f} us/prediction"
    )
    elapsed = await latency_batch()
    ideal = 0.4
    print(
        f"100 ms LM, batch 32 @ concurrency 8: {elapsed * 1000:.0f} ms "
        f"(ideal {ideal * 1000:.0f} ms, limit {1.2 * ideal * 1000:.0f} ms, ratio {elapsed / ideal:.2f})"
    )
    ok = rate >= 2000 and elapsed <= 1.2 * ideal
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
