"""Do runs get better on the default local model? Zero-shot vs the optimizers, two label tasks.

Question it answers (issue 24): on the local 135M model (``local/smollm2``) with the label set
on, which optimizer raises the test reward above zero-shot, by how much, at what cost — and
how close does retrieving the nearest training examples (``NearestFewShot``) come to a plain
k-nearest-neighbour vote over the same MiniLM embeddings (the reference: what the examples'
labels alone can give)?

Tasks (both in the repository, nothing read from ../shared):
- ``tweeteval``: ``datasets/builtin/tweeteval_sentiment/data.jsonl`` (the first 300 tweets of
  the TweetEval sentiment validation split, github.com/cardiffnlp/tweeteval; Barbieri et al.
  2020 and SemEval-2017 Task 4, Rosenthal et al. 2017; research use, see
  ``datasets/builtin/README.md``). Label ``negative | neutral | positive``.
- ``demo``: ``datasets/builtin/demo/data.jsonl`` (written for Trainboard): messages routed to
  ``money | bug | box``.

Rows: file order, the first ``--train`` rows train, the next ``--test`` rows test (the same
rows for every optimizer and seed). Each program: one Generator on ``local/smollm2``
(temperature 0, max_tokens 32, in-memory response cache), instructions naming the task but
not the labels, the output field a ``Literal`` (grammar-constrained), ExactMatch reward. Every
fit: validation split 0.25, batch size 8, fit seed = optimizer seed = the run's seed.

- ``zero-shot``: the untrained program (the "before" of every row).
- ``rfs``: RandomFewShot, 1 epoch, 1-3 examples, 4 candidates.
- ``omega``: OMEGA, 1 epoch, few-shot on (1-3 examples), DNS on ``local/minilm``; its
  mutations on ``local/smollm2`` with ``max_tokens=384`` (as ``bench/omega.py``).
- ``nearest``: NearestFewShot (``--k`` neighbours, vote hint on unless ``--no-vote``).
- ``knn``: the reference: majority label of the ``--k`` nearest training rows of the fit's
  training part (the rows NearestFewShot pools) by MiniLM cosine (ties: the nearest's label).

Per optimizer: test reward before -> after (mean and per seed), LM calls of the fit
(``history.usage``: calls plus response-cache hits, i.e. what the fit would pay on its own:
the runs share one in-memory cache, so a later run finds the seed's predictions there and its
fit seconds are lower), embedding calls, fit seconds; OMEGA's refused junk mutations by rule.

Run: nice -n 5 .venv/bin/python bench/learning.py [--seeds 0 1 2] [--only nearest knn]
Last line: ``learning: nearest A (kNN vote K), rfs B, omega C, zero-shot Z; refused junk J``
(means over tasks and seeds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import training.engine as synalinks  # noqa: E402
from training.engine.modules import example_retrieval as retrieval  # noqa: E402

OPTIMIZERS = ("rfs", "omega", "nearest", "knn")


class Tweet(synalinks.DataModel):
    text: str = Field(description="A tweet.")


class TweetSentiment(synalinks.DataModel):
    label: Literal["negative", "neutral", "positive"] = Field(description="The tweet's sentiment.")


class Message(synalinks.DataModel):
    message: str = Field(description="A customer's message.")


class Route(synalinks.DataModel):
    team: Literal["money", "bug", "box"] = Field(description="The team code for the message.")


TASKS = {
    "tweeteval": {
        "file": ROOT / "datasets" / "builtin" / "tweeteval_sentiment" / "data.jsonl",
        "input": Tweet,
        "output": TweetSentiment,
        "in_field": "text",
        "out_field": "label",
        "instructions": "Classify the sentiment of the tweet.",
    },
    "demo": {
        "file": ROOT / "datasets" / "builtin" / "demo" / "data.jsonl",
        "input": Message,
        "output": Route,
        "in_field": "message",
        "out_field": "team",
        "instructions": "Route the customer's message to the team that handles it.",
    },
}


def load(task: dict, train: int, test: int) -> tuple[list[dict], list[dict]]:
    lines = task["file"].read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    if len(rows) < train + test:
        raise SystemExit(f"{task['file']}: {len(rows)} rows, {train + test} needed")
    return rows[:train], rows[train : train + test]


def arrays(task: dict, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([task["input"](**{task["in_field"]: r[task["in_field"]]}) for r in rows], object)
    y = np.array(
        [task["output"](**{task["out_field"]: r[task["out_field"]]}) for r in rows], object
    )
    return x, y


def local_omega(seed: int, em):
    """OMEGA with few-shot on, its mutations on the local model (``bench/selection.py`` too).

    Its own LM object: the same local model, with room for its reasoning and a whole prompt
    (the task's 32 tokens cut every rewrite to a stub such as "The task").
    """
    optimizer_lm = synalinks.LanguageModel(
        model="local/smollm2", temperature=0.0, max_tokens=384, cache="memory"
    )
    return synalinks.optimizers.OMEGA(
        language_model=optimizer_lm,
        embedding_model=em,
        few_shot_learning=True,
        nb_min_examples=1,
        nb_max_examples=3,
        seed=seed,
    )


def make_optimizer(kind: str, seed: int, lm, em, args):
    if kind == "rfs":
        return synalinks.optimizers.RandomFewShot(
            nb_min_examples=1, nb_max_examples=3, nb_candidates=4, seed=seed
        )
    if kind == "omega":
        return local_omega(seed, em)
    return synalinks.optimizers.NearestFewShot(
        embedding_model=em, k=args.k, vote=not args.no_vote, seed=seed
    )


async def build(task: dict, lm, optimizer):
    inputs = synalinks.Input(data_model=task["input"])
    outputs = await synalinks.Generator(
        data_model=task["output"], language_model=lm, instructions=task["instructions"]
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="learning")
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=[task["out_field"]]), optimizer=optimizer
    )
    return program


async def knn_vote(task: dict, train: list[dict], test: list[dict], em, k: int) -> float:
    """Test accuracy of the majority label among the k nearest pool rows (the fit's
    training part: the rows before the validation split)."""
    cut = len(train) - int(round(len(train) * 0.25))
    pool = train[:cut]
    inp, out = task["in_field"], task["out_field"]
    vectors = await em([retrieval.retrieval_text({inp: r[inp]}) for r in pool])
    matrix = np.stack([retrieval.decode_vector(retrieval.encode_vector(v)) for v in vectors])
    queries = await em([retrieval.retrieval_text({inp: r[inp]}) for r in test])
    correct = 0
    for row, query in zip(test, queries, strict=True):
        picks = retrieval.nearest_indices(matrix, np.asarray(query), k)
        labels = [pool[i][out] for i in picks]
        best = max(set(labels), key=lambda label: (labels.count(label), -labels.index(label)))
        correct += best == row[out]
    return correct / len(test)


async def run_one(kind, task, train, test, seed, lm, em, args) -> dict:
    optimizer = make_optimizer(kind, seed, lm, em, args)
    program = await build(task, lm, optimizer)
    x_train, y_train = arrays(task, train)
    x_test, y_test = arrays(task, test)
    before = (await program.evaluate(x_test, y_test, batch_size=8))["reward"]
    started = time.perf_counter()
    history = await program.fit(
        x_train, y_train, validation_split=0.25, epochs=1, batch_size=8, seed=seed
    )
    seconds = time.perf_counter() - started
    after = (await program.evaluate(x_test, y_test, batch_size=8))["reward"]
    state = program.trainable_variables[0].value
    return {
        "before": before,
        "after": after,
        "calls": history.usage["calls"] + history.usage["cache_hits"],
        "embedding_calls": history.usage["embedding_calls"],
        "seconds": seconds,
        "refused": sum(getattr(optimizer, "refusals", {}).values()),
        "refusals": dict(getattr(optimizer, "refusals", {})),
        "kept_pool": bool(state.get("retrieval")),
        "instructions": state.get("instructions", "")[:80],
    }


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


async def main(args) -> None:
    lm = synalinks.LanguageModel(
        model="local/smollm2", temperature=0.0, max_tokens=32, cache="memory"
    )
    em = synalinks.EmbeddingModel(model="local/minilm")
    kinds = [k for k in OPTIMIZERS if k in args.only]
    totals: dict[str, list[float]] = {k: [] for k in [*kinds, "zero-shot"]}
    refused = 0
    for name in args.tasks:
        task = TASKS[name]
        train, test = load(task, args.train, args.test)
        labels = [r[task["out_field"]] for r in test]
        majority = max(labels.count(label) for label in set(labels)) / len(labels)
        print(f"== {name}: {len(train)} train / {len(test)} test rows; majority {majority:.3f}")
        zero = None
        for kind in kinds:
            if kind == "knn":
                score = await knn_vote(task, train, test, em, args.k)
                totals["knn"].append(score)
                print(f"  knn     : k={args.k} vote over MiniLM: {score:.3f}")
                continue
            results = []
            for seed in args.seeds:
                result = await run_one(kind, task, train, test, seed, lm, em, args)
                results.append(result)
                refused += result["refused"]
                print(
                    f"  {kind:8}: seed {seed}: {result['before']:.3f} -> {result['after']:.3f}; "
                    f"{result['calls']} LM calls, {result['embedding_calls']} embedding calls, "
                    f"fit {result['seconds']:.0f} s; refused {result['refusals'] or 0}; "
                    f"instructions {result['instructions']!r}"
                    + ("; pool kept" if result["kept_pool"] else ""),
                    flush=True,
                )
            zero = results[0]["before"]
            afters = [r["after"] for r in results]
            totals[kind].append(mean(afters))
            print(
                f"  {kind:8}: mean {mean([r['before'] for r in results]):.3f} -> "
                f"{mean(afters):.3f} (per seed {', '.join(f'{a:.3f}' for a in afters)}); "
                f"LM calls {mean([r['calls'] for r in results]):.0f}, "
                f"fit {mean([r['seconds'] for r in results]):.0f} s"
            )
        if zero is not None:
            totals["zero-shot"].append(zero)

    def show(kind: str) -> str:
        return f"{mean(totals[kind]):.3f}" if totals.get(kind) else "n/a"

    print(
        f"learning: nearest {show('nearest')} (kNN vote {show('knn')}), rfs {show('rfs')}, "
        f"omega {show('omega')}, zero-shot {show('zero-shot')}; refused junk {refused}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", default=list(OPTIMIZERS), choices=OPTIMIZERS)
    parser.add_argument("--train", type=int, default=32)
    parser.add_argument("--test", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--no-vote", action="store_true")
    asyncio.run(main(parser.parse_args()))
