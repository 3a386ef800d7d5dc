"""Throughput of the offline local models, through litellm exactly as the engine calls them.

    .venv/bin/python bench/local_models.py [--calls 24] [--concurrency 1 4] [--instances 1]

Prints, for `local/smollm2`, calls/s and tokens/s of short structured (json_schema) calls at
each concurrency, each compared with the concurrency-1 baseline of the same run; and, for
`local/minilm`, embeddings/s for one big batched request and for one-text requests.

Question it answers: does concurrency help on a small CPU? One Llama instance serves one call
at a time, so with `--instances 1` concurrency only overlaps the Python/litellm overhead;
`--instances N` splits the cores between N Llama instances (TRAINBOARD_LOCAL_LM_INSTANCES;
the default is 2 on 2+ cores), so N calls decode at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SCHEMA = {
    "title": "Answer",
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "a short answer"},
        "confident": {"type": "boolean"},
    },
    "required": ["answer", "confident"],
    "additionalProperties": False,
}
RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "Answer", "schema": SCHEMA, "strict": True},
}
QUESTIONS = [
    "What is the capital of France?",
    "What colour is the sky on a clear day?",
    "How many legs does a spider have?",
    "What is 12 plus 30?",
    "Which planet is closest to the sun?",
    "What do bees make?",
    "What is frozen water called?",
    "Name a primary colour.",
]
SENTENCES = [
    f"Sentence number {i} talks about {topic}."
    for i, topic in enumerate(["cats", "finance", "rain", "football", "music", "trains"] * 43)
]


async def structured_call(litellm, i: int) -> tuple[int, int, bool]:
    response = await litellm.acompletion(
        model="local/smollm2",
        messages=[
            {"role": "system", "content": "Reply with a JSON object with an answer."},
            {"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]},
        ],
        response_format=RESPONSE_FORMAT,
        temperature=0.0,
        max_tokens=96,
        seed=i,
        num_retries=0,
    )
    # Grammar-constrained, so only a max_tokens cut (a 135M model rambles in strings) can
    # leave it unparsable; count those instead of failing the benchmark.
    try:
        json.loads(response.choices[0].message.content)
        parsed = True
    except json.JSONDecodeError:
        parsed = False
    return response.usage.prompt_tokens, response.usage.completion_tokens, parsed


async def lm_round(litellm, calls: int, concurrency: int) -> dict:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> tuple[int, int, bool]:
        async with gate:
            return await structured_call(litellm, i)

    started = time.perf_counter()
    usages = await asyncio.gather(*(one(i) for i in range(calls)))
    seconds = time.perf_counter() - started
    completion = sum(c for _, c, _ in usages)
    prompt = sum(p for p, _, _ in usages)
    return {
        "calls_per_s": calls / seconds,
        "completion_tokens_per_s": completion / seconds,
        "total_tokens_per_s": (prompt + completion) / seconds,
        "seconds": seconds,
        "unparsed": sum(1 for *_, parsed in usages if not parsed),
    }


async def embedding_round(litellm) -> dict:
    started = time.perf_counter()
    response = await litellm.aembedding(model="local/minilm", input=SENTENCES)
    batched = len(response.data) / (time.perf_counter() - started)
    singles = SENTENCES[:64]
    started = time.perf_counter()
    for text in singles:
        await litellm.aembedding(model="local/minilm", input=[text])
    one_by_one = len(singles) / (time.perf_counter() - started)
    return {"batched": batched, "one_by_one": one_by_one, "batch_size": len(SENTENCES)}


async def main(args: argparse.Namespace) -> None:
    if args.instances:
        os.environ["TRAINBOARD_LOCAL_LM_INSTANCES"] = str(args.instances)
    import trainboard_local  # first: it keeps litellm on its bundled price map (no fetch)
    from trainboard_local.smollm2 import _settings

    trainboard_local.register()  # the provider, as the engine adds it on a first local request
    import litellm

    instances, threads, n_ctx = _settings()
    print(
        f"cores: {os.cpu_count()}  llama instances: {instances} x {threads} threads  "
        f"n_ctx: {n_ctx}  calls/round: {args.calls}"
    )

    started = time.perf_counter()
    await structured_call(litellm, 0)
    print(f"local/smollm2 load + first call: {time.perf_counter() - started:.2f} s")
    baseline = None
    for concurrency in args.concurrency:
        result = await lm_round(litellm, args.calls, concurrency)
        baseline = baseline or result
        speedup = result["calls_per_s"] / baseline["calls_per_s"]
        print(
            f"local/smollm2 structured, concurrency {concurrency}: "
            f"{result['calls_per_s']:.2f} calls/s, "
            f"{result['completion_tokens_per_s']:.1f} completion tok/s, "
            f"{result['total_tokens_per_s']:.1f} total tok/s "
            f"({speedup:.2f}x the concurrency-{args.concurrency[0]} baseline; "
            f"{result['unparsed']}/{args.calls} cut by max_tokens)"
        )

    started = time.perf_counter()
    await litellm.aembedding(model="local/minilm", input=["warm up"])
    print(f"local/minilm load + first call: {time.perf_counter() - started:.2f} s")
    emb = await embedding_round(litellm)
    print(
        f"local/minilm: {emb['batched']:.0f} embeddings/s in one request of {emb['batch_size']}, "
        f"{emb['one_by_one']:.0f} embeddings/s one text per request "
        f"({emb['batched'] / emb['one_by_one']:.1f}x for batching)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=24, help="LM calls per concurrency level")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument(
        "--instances", type=int, default=None, help="Llama instances (default: the module's)"
    )
    asyncio.run(main(parser.parse_args()))
