"""Do runs get better on data nobody here tuned for? Every optimizer on five label tasks.

Question it answers: on the local 135M model (``local/smollm2``), with about 100 training rows
and 150 test rows a task, does what the launch form does by default on a label task
(``CalibratedLabels``: every label scored, a bias per label, the nearest training rows' vote
and a ridge read-out of the input's embedding learned from the training rows) beat the floor — always answering the commonest label
(``majority``) and a nearest-neighbour vote over the same MiniLM embeddings (``knn``) — and
the untrained program (``zero-shot``, its label sampled as before), and does any run end with a
program worse than its seed?

Tasks (all in the repository, nothing read from ../shared):
- four TweetEval tasks, ``bench/data/tweeteval_*.jsonl`` (``bench/data/README.md``: sources,
  licences, how they were sampled): ``sentiment`` (3 labels), ``offensive`` (2, imbalanced
  about 2:1), ``stance_abortion`` (3, imbalanced), ``emoji`` (5 emojis of different meanings);
- ``demo``: ``datasets/builtin/demo/data.jsonl`` (48 rows: 32 train, 16 test; reported, not in
  the means: 16 test rows cannot tell).

Per task and seed: the task's rows shuffled by the seed, the first ``--train`` train, the next
``--test`` test; the program is one Generator on ``local/smollm2`` (temperature 0, an
in-memory response cache shared by every run: a later run finds the seed's scorings there),
instructions naming the task, the output a ``Literal`` label field, ExactMatch. Every fit:
validation split 0.2 (the launch form's), batch size 8, one epoch, seed = the run's.

- ``zero-shot``: the untrained program with its label sampled (``score_labels=False``): what a
  program did before labels were scored;
- ``scored``: the untrained program, every label scored (the seed of every fit below);
- ``default``: ``CalibratedLabels`` with the vote and the embedding read-out (the launch
  form's default on a label task);
- ``calibrated``: ``CalibratedLabels(vote=False)``: a bias per label only;
- ``nearest``: ``NearestFewShot`` (k=4, vote hint); ``rfs``: ``RandomFewShot`` (1-3 examples,
  4 candidates); ``omega``: ``OMEGA`` (few-shot on, DNS on MiniLM, mutations on the local model
  with 384 tokens);
- ``knn``: the majority label of the 5 nearest training rows (the fit's training part) by
  MiniLM cosine, ties to the nearest's; ``majority``: the training rows' commonest label.

Each fit reports its test reward before (its seed) and after, whether its program replaced the
seed, the paired bootstrap of after − before on test, LM calls (calls and cache hits: what the
fit would pay alone) and fit seconds. ``kept worse than seed`` counts fits whose trained
program is below its seed on test beyond noise (the paired 95% interval below 0).

Run: nice -n 5 .venv/bin/python bench/learning.py [--seeds 0 1 2] [--tasks sentiment ...]
Last line (means over the four TweetEval tasks and the seeds):
``learning: default D (kNN vote K, majority M), calibrated C, nearest N, rfs R, omega O,
zero-shot Z; kept worse than seed W``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trainboard_local  # noqa: E402,F401  (registers the offline models with the engine)
import training.engine as synalinks  # noqa: E402
from training.engine.data_model import create_data_model  # noqa: E402
from training.engine.modules import example_retrieval as retrieval  # noqa: E402
from training.engine.utils.paired_bootstrap import paired_bootstrap  # noqa: E402

DATA = ROOT / "bench" / "data"
TASKS = {
    "sentiment": (DATA / "tweeteval_sentiment.jsonl", "text", "label", "Classify the sentiment of the tweet."),
    "offensive": (DATA / "tweeteval_offensive.jsonl", "text", "label", "Say whether the tweet is offensive."),
    "stance_abortion": (DATA / "tweeteval_stance_abortion.jsonl", "text", "label", "Classify the tweet's stance on abortion."),
    "emoji": (DATA / "tweeteval_emoji.jsonl", "text", "label", "Predict the emoji that goes with the tweet."),
    "demo": (ROOT / "datasets" / "builtin" / "demo" / "data.jsonl", "message", "team", "Route the customer's message to the team that handles it."),
}  # fmt: skip
PUBLIC = ("sentiment", "offensive", "stance_abortion", "emoji")
FITS = ("default", "calibrated", "nearest", "rfs", "omega")
#: The fit settings of the launch form's default on a label task.
FIT = {"validation_split": 0.2, "epochs": 1, "batch_size": 8}
KNN_K = 5


def load(task: str, train: int, test: int, seed: int) -> tuple[list[dict], list[dict], list[str]]:
    path, _, out_field, _ = TASKS[task]
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    labels = sorted({row[out_field] for row in rows})
    random.Random(f"{task}-{seed}").shuffle(rows)
    if task == "demo":
        train, test = 32, 16
    if len(rows) < train + test:
        raise SystemExit(f"{path}: {len(rows)} rows, {train + test} needed")
    return rows[:train], rows[train : train + test], labels


def models(task: str, labels: list[str]):
    _, in_field, out_field, _ = TASKS[task]
    inputs = create_data_model(
        "Input", [{"name": in_field, "type": "str", "description": "The text."}]
    )
    outputs = create_data_model(
        "Output",
        [{"name": out_field, "type": "str", "description": "The text's label.", "choices": labels}],
    )
    return inputs, outputs


def arrays(task, rows, inputs, outputs):
    _, in_field, out_field, _ = TASKS[task]
    x = np.array([inputs(**{in_field: r[in_field]}) for r in rows], dtype=object)
    y = np.array([outputs(**{out_field: r[out_field]}) for r in rows], dtype=object)
    return x, y


def make_optimizer(kind: str, seed: int, em):
    if kind == "default":
        return synalinks.optimizers.CalibratedLabels(embedding_model=em, seed=seed)
    if kind == "calibrated":
        return synalinks.optimizers.CalibratedLabels(vote=False, seed=seed)
    if kind == "nearest":
        return synalinks.optimizers.NearestFewShot(embedding_model=em, k=4, seed=seed)
    if kind == "rfs":
        return synalinks.optimizers.RandomFewShot(
            nb_min_examples=1, nb_max_examples=3, nb_candidates=4, seed=seed
        )
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


async def build(task, lm, inputs, outputs, optimizer=None, score_labels=True):
    _, _, out_field, instructions = TASKS[task]
    x = synalinks.Input(data_model=inputs)
    y = await synalinks.Generator(
        data_model=outputs, language_model=lm, instructions=instructions, score_labels=score_labels
    )(x)
    program = synalinks.Program(inputs=x, outputs=y, name="learning")
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=[out_field]), optimizer=optimizer)
    return program


async def per_example(program, x, y) -> list[float]:
    rewards = synalinks.callbacks.ExampleRewards()
    await program.evaluate(x, y, batch_size=8, callbacks=[rewards])
    return [float(r) for r in rewards.rewards]


async def knn_vote(task, train, test, em) -> float:
    """Test accuracy of the majority label of the KNN_K nearest rows of the fit's training
    part (ties: the nearest's label)."""
    _, in_field, out_field, _ = TASKS[task]
    cut = len(train) - int(round(len(train) * FIT["validation_split"]))
    pool = train[:cut]
    texts = [retrieval.retrieval_text({in_field: r[in_field]}) for r in pool]
    matrix = retrieval.pool_matrix(
        [{"vector": retrieval.encode_vector(v)} for v in await em(texts)]
    )
    queries = await em([retrieval.retrieval_text({in_field: r[in_field]}) for r in test])
    correct = 0
    for row, query in zip(test, queries, strict=True):
        labels = [pool[i][out_field] for i in retrieval.nearest_indices(matrix, query, KNN_K)]
        best = max(set(labels), key=lambda label: (labels.count(label), -labels.index(label)))
        correct += best == row[out_field]
    return correct / len(test)


async def run_fit(kind, task, seed, lm, em, data, seed_rewards) -> dict:
    inputs, outputs, x, y, x_test, y_test = data
    optimizer = make_optimizer(kind, seed, em)
    program = await build(task, lm, inputs, outputs, optimizer)
    started = time.perf_counter()
    with synalinks.usage.track() as usage:
        await program.fit(x, y, seed=seed, **FIT)
    seconds = time.perf_counter() - started
    after = await per_example(program, x_test, y_test)
    variable = program.trainable_variables[0]
    seed_value = next(c["value"] for c in variable.candidates if c["operation"] == "seed")
    paired = paired_bootstrap(seed_rewards, after)
    return {
        "after": statistics.fmean(after),
        "replaced": variable.value != seed_value,
        "paired": paired,
        "calls": usage.calls + usage.cache_hits,
        "seconds": seconds,
        "parts": getattr(getattr(optimizer, "fits", {}).get(variable.name), "config", None),
    }


def mean(values) -> float:
    return statistics.fmean(values) if values else float("nan")


async def main(args) -> None:
    lm = synalinks.LanguageModel(model="local/smollm2", temperature=0.0, cache="memory")
    em = synalinks.EmbeddingModel(model="local/minilm")
    fits = [k for k in FITS if k in args.only]
    totals: dict[str, list[float]] = {}
    worse = lower = 0
    for task in args.tasks:
        print(f"== {task}", flush=True)
        scores: dict[str, list[float]] = {}
        for seed in args.seeds:
            train, test, labels = load(task, args.train, args.test, seed)
            inputs, outputs = models(task, labels)
            x, y = arrays(task, train, inputs, outputs)
            x_test, y_test = arrays(task, test, inputs, outputs)
            data = (inputs, outputs, x, y, x_test, y_test)
            out_field = TASKS[task][2]
            majority_label = Counter(r[out_field] for r in train).most_common(1)[0][0]
            found = {
                "majority": mean([r[out_field] == majority_label for r in test]),
                "knn": await knn_vote(task, train, test, em),
                "zero-shot": mean(
                    await per_example(
                        await build(task, lm, inputs, outputs, score_labels=False), x_test, y_test
                    )
                ),
            }
            seed_rewards = await per_example(await build(task, lm, inputs, outputs), x_test, y_test)
            found["scored"] = mean(seed_rewards)
            line = [f"  seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in found.items())]
            for kind in fits:
                result = await run_fit(kind, task, seed, lm, em, data, seed_rewards)
                found[kind] = result["after"]
                paired = result["paired"]
                worse += paired.high < 0
                lower += paired.difference < 0
                line.append(
                    f"    {kind:10} {found['scored']:.3f} -> {result['after']:.3f} "
                    f"({'replaced the seed' if result['replaced'] else 'kept the seed'}; test "
                    f"{paired.describe()}); {result['calls']} LM calls, fit "
                    f"{result['seconds']:.0f} s"
                    + (f"; {result['parts'].parts}" if result["parts"] else "")
                )
            print("\n".join(line), flush=True)
            for key, value in found.items():
                scores.setdefault(key, []).append(value)
        summary = ", ".join(f"{k} {mean(v):.3f}" for k, v in scores.items())
        print(f"  {task} means over seeds: {summary}", flush=True)
        if task in PUBLIC:
            for key, values in scores.items():
                totals.setdefault(key, []).append(mean(values))

    def show(key: str) -> str:
        return f"{mean(totals[key]):.3f}" if totals.get(key) else "n/a"

    print(f"fits whose test reward is below their seed's at all: {lower}")
    print(
        f"learning: default {show('default')} (kNN vote {show('knn')}, majority "
        f"{show('majority')}), calibrated {show('calibrated')}, nearest {show('nearest')}, "
        f"rfs {show('rfs')}, omega {show('omega')}, zero-shot {show('zero-shot')}; kept worse "
        f"than seed {worse}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=[*PUBLIC, "demo"], choices=list(TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", default=list(FITS), choices=FITS)
    parser.add_argument("--train", type=int, default=100)
    parser.add_argument("--test", type=int, default=150)
    asyncio.run(main(parser.parse_args()))
