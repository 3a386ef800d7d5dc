"""OMEGA benchmark: the cost of the DNS competition, and what training buys on a small task.

    .venv/bin/python bench/omega.py [--populations 10 20 40] [--fake-embeddings] [--skip-fit]

1. Competition cost. For each population size N, a population of N distinct candidates
   competes (a) the OMEGA way — each candidate embedded once (content-hash cache), all pairwise
   cosine distances in one numpy operation — and (b) the naive way, as a per-pair distance
   function that embeds both candidates of every pair. Printed: embedding requests, texts
   embedded and wall time of one competition each; then, for OMEGA, a second epoch in which
   half the population was replaced (only the newcomers are embedded).
   Embeddings: `local/minilm` (or `--fake-embeddings`: the scripted fake with 5 ms/request).
2. Training gain. A tiny sentiment task whose labels the model cannot guess ("pos"/"neg",
   exact match; told nothing but "Classify the sentiment of the review.") with `local/smollm2`
   as both the task LM and OMEGA's LM and `local/minilm` for DNS: reward of the starting
   program vs the trained one on a held-out test set, twice — instructions only (mutations must
   find the label set; for reference, a hand-written "The label must be 'pos' or 'neg'." scores
   ~0.44 with this model) and with few-shot examples. SmolLM2-135M is tiny; the gain is
   reported as measured, whatever it is.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import trainboard_local  # noqa: E402,F401  (registers the offline models with the engine)
import training.engine as synalinks  # noqa: E402
from training.engine.optimizers import OMEGA  # noqa: E402
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel  # noqa: E402
from training.engine.testing.tasks import sentiment_arrays, sentiment_program  # noqa: E402

WORDS = (
    "answer precisely concisely carefully think step reason check facts units format lowercase "
    "label sentiment review positive negative explain briefly avoid guessing verify numbers"
).split()


def instructions(i: int, rng: random.Random) -> str:
    return f"Variant {i}: " + " ".join(rng.choice(WORDS) for _ in range(12))


async def naive_distance(c1, c2, embedding_model=None, **kwargs):
    """The N² baseline: embed both candidates for every pair (one request per pair)."""
    import numpy as np

    a, b = await embedding_model([str(c1), str(c2)])
    a, b = np.asarray(a), np.asarray(b)
    return float(1 - a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def make_population(optimizer: OMEGA, size: int, rng: random.Random, start: int = 0):
    variable = synalinks.Variable({"instructions": ""}, name="v")
    optimizer.trainable_variables = [variable]
    add(optimizer, variable, size, rng, start)
    return variable


def add(optimizer: OMEGA, variable, count: int, rng: random.Random, start: int) -> None:
    for i in range(start, start + count):
        candidate = optimizer.add_candidate(
            variable, {"instructions": instructions(i, rng)}, "mutation", reward=rng.random()
        )
        candidate["status"] = "scored"


async def timed_competition(optimizer: OMEGA, variable) -> tuple[int, int, float]:
    with synalinks.usage.track() as usage:
        started = time.perf_counter()
        await optimizer.compete(variable)
        seconds = time.perf_counter() - started
    texts = optimizer.competition_stats[-1]["embedding_texts"]
    return usage.embedding_calls, texts, seconds


async def competition_cost(populations: list[int], em) -> None:
    lm = FakeLanguageModel()
    print("\n== DNS competition cost (one competition, all candidates new) ==")
    print(f"embedding model: {em.model}")
    header = (
        f"{'N':>4} | {'OMEGA req':>9} {'texts':>6} {'ms':>8} | {'naive req':>9} {'texts':>6} "
        f"{'ms':>9} | {'speed-up':>8} | {'epoch 2: pop':>12} {'req':>4} {'texts':>6} {'ms':>7}"
    )
    print(header)
    print("-" * len(header))
    for size in populations:
        await em(["warm up"])  # load the model outside the timings
        rng = random.Random(size)
        omega = OMEGA(language_model=lm, embedding_model=em, population_size=size, seed=0)
        variable = make_population(omega, size, rng)
        ours = await timed_competition(omega, variable)
        # epoch 2: the population refilled to N with N/2 newcomers — only they are embedded
        kept = len(omega.population(variable))
        newcomers = size - kept + size // 2
        add(omega, variable, newcomers, rng, start=1000)
        second = await timed_competition(omega, variable)
        second_population = kept + newcomers

        rng = random.Random(size)
        naive = OMEGA(
            language_model=lm,
            embedding_model=em,
            distance_function=naive_distance,
            population_size=size,
            seed=0,
        )
        variable = make_population(naive, size, rng)
        with synalinks.usage.track() as usage:
            started = time.perf_counter()
            await naive.compete(variable)
            naive_seconds = time.perf_counter() - started
        naive_requests = usage.embedding_calls
        naive_texts = 2 * naive_requests
        print(
            f"{size:>4} | {ours[0]:>9} {ours[1]:>6} {ours[2] * 1000:>8.1f} | {naive_requests:>9} "
            f"{naive_texts:>6} {naive_seconds * 1000:>9.1f} | {naive_seconds / ours[2]:>7.1f}x | "
            f"{second_population:>12} {second[0]:>4} {second[1]:>6} {second[2] * 1000:>7.1f}"
        )
    print(
        "OMEGA texts embedded = N (linear, one batched request); naive requests = pairs with "
        "different rewards ≈ N(N-1)/2. Epoch 2: kept survivors + newcomers compete; only the "
        "newcomers are embedded."
    )


REVIEWS = [
    ("I loved this film, the acting was wonderful.", "positive"),
    ("Terrible plot and painfully boring scenes.", "negative"),
    ("A delightful, charming little story.", "positive"),
    ("The worst meal I have ever eaten.", "negative"),
    ("Great service and friendly staff.", "positive"),
    ("The product broke after one day, awful.", "negative"),
    ("An absolute joy to read from start to end.", "positive"),
    ("I want my money back, very disappointing.", "negative"),
    ("Beautiful photography and a moving score.", "positive"),
    ("Rude waiter and cold soup.", "negative"),
    ("Fantastic value, I would buy it again.", "positive"),
    ("Dull, predictable and far too long.", "negative"),
    ("The hotel room was clean and lovely.", "positive"),
    ("Noisy, dirty and overpriced.", "negative"),
    ("What a brilliant performance by the cast!", "positive"),
    ("The app keeps crashing, useless.", "negative"),
]


#: Labels the model cannot guess: it must be told (instructions) or shown (examples).
LABELS = {"positive": "pos", "negative": "neg"}


async def training_gain(epochs: int, embedding_model, few_shot: bool) -> None:
    what = "instructions + few-shot examples" if few_shot else "instructions only"
    print(f"\n== Baseline vs trained reward ({what}; local/smollm2 + local/minilm) ==")
    lm = synalinks.LanguageModel(model="local/smollm2", max_tokens=384)
    program = await sentiment_program(
        lm,
        OMEGA(
            language_model=lm,
            embedding_model=embedding_model,
            few_shot_learning=few_shot,
            nb_min_examples=1,
            nb_max_examples=3,
            population_size=6,
            seed=0,
        ),
    )
    x_train, y_train = sentiment_arrays(REVIEWS[:10], LABELS)
    x_test, y_test = sentiment_arrays(REVIEWS[10:], LABELS)
    started = time.perf_counter()
    baseline = await program.evaluate(x_test, y_test)
    with synalinks.usage.track() as usage:
        history = await program.fit(
            x_train, y_train, validation_split=0.4, epochs=epochs, batch_size=3, seed=0
        )
    trained = await program.evaluate(x_test, y_test)
    optimizer = program.optimizer
    operations = [c["operation"] for c in program.trainable_variables[0].candidates]
    print(f"train 6 / validation 4 / held-out test {len(REVIEWS) - 10}, epochs {epochs}, batch 3")
    print(
        f"test reward: baseline {baseline['reward']:.3f} -> trained {trained['reward']:.3f} "
        f"(gain {trained['reward'] - baseline['reward']:+.3f})"
    )
    print(f"val_reward per epoch: {[round(v, 3) for v in history.history.get('val_reward', [])]}")
    print(
        f"candidates: {len(operations)} ({', '.join(f'{op} {operations.count(op)}' for op in sorted(set(operations)))}); "
        f"failed LM operations skipped: {optimizer.failed_operations}"
    )
    print(
        f"fit usage: {usage.calls} LM calls, {usage.embedding_calls} embedding requests, "
        f"{optimizer.texts_embedded} texts embedded; total wall {time.perf_counter() - started:.1f}s"
    )
    best = program.trainable_variables[0].value
    print(f"best instructions: {best['instructions'][:200]!r}; examples: {len(best['examples'])}")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--populations", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--fake-embeddings", action="store_true")
    parser.add_argument("--skip-fit", action="store_true")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    if args.fake_embeddings:
        em = FakeEmbeddingModel(latency=0.005)
    else:
        em = synalinks.EmbeddingModel(model="local/minilm")
    await competition_cost(args.populations, em)
    if not args.skip_fit:
        for few_shot in (False, True):
            await training_gain(
                args.epochs, synalinks.EmbeddingModel(model="local/minilm"), few_shot
            )


if __name__ == "__main__":
    asyncio.run(main())
