"""What recording LM call traces costs (no network, fake LM).

Predictions per second through a Generator (instructions + three few-shot examples) on the
zero-latency fake LM, with and without ``synalinks.tracing.record()`` around them (the
baseline, measured in the same run: rounds interleaved, CPU time of this process, the best
round of each compared, so a busy machine hurts both alike),
and the bytes a trace takes stored: its JSON, as the dashboard's ``CallTrace`` row holds it
(messages, response, parsed output, figures), per 1,000 calls. Aim: overhead < 10 %.
Records are finished (context filled in, texts redacted and cut) when first read, not on the
prediction path: the time that takes is printed apart (CPU ms per 1,000 calls).

Run: .venv/bin/python bench/trace_overhead.py
Last line: ``trace overhead: X % (with Y/s, without Z/s), N KB per 1000 calls``
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from query_answer import Query, query_answer_program  # noqa: E402

import training.engine as synalinks  # noqa: E402

PREDICTIONS = 2_000
ROUNDS = 9


INSTRUCTIONS = "Answer the question with one short fact. Do not explain."
EXAMPLES = [
    ({"query": "Capital of France?"}, {"answer": "Paris"}),
    ({"query": "What is 2+2?"}, {"answer": "4"}),
    ({"query": "Color of the sky?"}, {"answer": "blue"}),
]


async def rate(program, x, traced: bool) -> tuple[float, list]:
    """Predictions per CPU second of this process (other processes on a shared machine
    don't count against it), and the records when traced."""
    gc.collect()
    started = time.process_time()
    if traced:
        with synalinks.tracing.record(max_calls=len(x)) as recorder:
            predictions = await program.predict(x, batch_size=256)
        records = recorder.records
    else:
        predictions = await program.predict(x, batch_size=256)
        records = []
    elapsed = time.process_time() - started
    assert all(p is not None for p in predictions)
    assert not traced or len(records) == len(x), len(records)
    return len(x) / elapsed, records


async def main() -> int:
    lm = synalinks.testing.FakeLanguageModel(
        responder=lambda request: {"answer": request.inputs["query"][::-1]}
    )
    program = await query_answer_program(lm, instructions=INSTRUCTIONS, examples=EXAMPLES)
    x = np.array(
        [Query(query=f"question number {i}: what is {i} squared?") for i in range(PREDICTIONS)],
        dtype="object",
    )
    await rate(program, x[:512], traced=True)  # warm-up (both paths)
    await rate(program, x[:512], traced=False)
    with_rates, without_rates, records = [], [], []
    for _ in range(ROUNDS):
        records = []  # the previous round's records are garbage by now, as in a real run
        without, _ = await rate(program, x, traced=False)
        with_, records = await rate(program, x, traced=True)
        without_rates.append(without)
        with_rates.append(with_)
    with_rate = max(with_rates)  # the best round of each: the least disturbed
    without_rate = max(without_rates)
    overhead = 100.0 * (without_rate / with_rate - 1.0)
    # Records are finished (context, redaction, the cut) when first read: that work is off
    # the prediction path (the dashboard does it in its writer thread); timed here apart.
    started = time.process_time()
    finished = [r.to_dict() for r in records]
    finishing = (time.process_time() - started) / len(records) * 1000
    stored = sum(len(json.dumps(r, ensure_ascii=False).encode()) for r in finished)
    per_thousand_kb = stored / len(records) * 1000 / 1024
    print(f"predictions per round: {PREDICTIONS}, rounds: {ROUNDS} (best round of each compared)")
    print(f"without traces: {', '.join(f'{r:,.0f}' for r in without_rates)} predictions/s")
    print(f"with traces:    {', '.join(f'{r:,.0f}' for r in with_rates)} predictions/s")
    print(f"one trace: {stored / len(records):,.0f} bytes of JSON on average")
    print(
        f"finishing records when read (redaction, cut, JSON of the output): "
        f"{finishing * 1000:,.0f} ms CPU per 1000 calls, off the prediction path"
    )
    print(
        f"trace overhead: {overhead:.1f} % (with {with_rate:,.0f}/s, without "
        f"{without_rate:,.0f}/s), {per_thousand_kb:,.0f} KB per 1000 calls"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
