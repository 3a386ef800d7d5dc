"""RandomFewShot on a small real task with the offline local model (local/smollm2).

Task: one-word sentiment labels ("positive" / "negative") for short reviews, scored with
ExactMatch. The baseline is the untrained program (no examples) on the test split, measured in
the same run; then fit with RandomFewShot and evaluate again. Prints test reward before and
after, fit wall time and LM calls (fit, and total), then re-evaluates the saved-and-reloaded
program with the response cache on to show the second evaluation costs no LM call.

Run: .venv/bin/python bench/fit_randomfewshot.py [--epochs 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trainboard_local  # noqa: E402,F401  (registers the offline models with the engine)
import training.engine as synalinks  # noqa: E402
from training.engine.testing.tasks import sentiment_arrays, sentiment_program  # noqa: E402

REVIEWS = [
    ("I loved every minute of this film.", "positive"),
    ("Terrible service, I will never come back.", "negative"),
    ("The food was delicious and the staff friendly.", "positive"),
    ("A boring, predictable plot.", "negative"),
    ("Absolutely fantastic product, works perfectly.", "positive"),
    ("It broke after two days.", "negative"),
    ("What a wonderful surprise, highly recommended!", "positive"),
    ("The worst hotel I have ever stayed in.", "negative"),
    ("Great value for the money.", "positive"),
    ("I regret buying this, a waste of money.", "negative"),
    ("The concert was amazing.", "positive"),
    ("The app keeps crashing and support never answers.", "negative"),
    ("Beautiful design and very comfortable.", "positive"),
    ("Cold food and rude waiters.", "negative"),
    ("My kids adore this game.", "positive"),
    ("Disappointing ending to a weak series.", "negative"),
    ("Fast delivery and excellent quality.", "positive"),
    ("Noisy, dirty and overpriced.", "negative"),
    ("The best coffee in town.", "positive"),
    ("The battery dies within an hour.", "negative"),
    ("A delightful book, I could not put it down.", "positive"),
    ("Awful acting and a silly script.", "negative"),
    ("Everything worked out of the box, very happy.", "positive"),
    ("The package arrived damaged and late.", "negative"),
]


def split():
    x, y = sentiment_arrays(REVIEWS)
    return (x[:14], y[:14]), (x[14:], y[14:])


async def build(lm):
    return await sentiment_program(
        lm,
        synalinks.optimizers.RandomFewShot(nb_min_examples=2, nb_max_examples=4, nb_candidates=2),
    )


async def main(epochs: int, seed: int) -> None:
    cache_dir = tempfile.mkdtemp(prefix="tb-bench-cache-")
    lm = synalinks.LanguageModel(model="local/smollm2", max_tokens=32, cache=f"disk:{cache_dir}")
    program = await build(lm)
    (x_train, y_train), (x_test, y_test) = split()

    with synalinks.usage.track() as baseline_usage:
        started = time.perf_counter()
        baseline = await program.evaluate(x_test, y_test, batch_size=10)
        baseline_time = time.perf_counter() - started
    with synalinks.usage.track() as fit_usage:
        started = time.perf_counter()
        history = await program.fit(
            x_train, y_train, validation_split=0.4, epochs=epochs, batch_size=8, seed=seed
        )
        fit_time = time.perf_counter() - started
    with synalinks.usage.track() as after_usage:
        trained = await program.evaluate(x_test, y_test, batch_size=10)

    path = os.path.join(cache_dir, "sentiment.json")
    program.save(path)
    reloaded = synalinks.Program.load(path)
    with synalinks.usage.track() as reload_usage:
        again = await reloaded.evaluate(x_test, y_test, batch_size=10)

    print(
        f"task: sentiment labels, {len(x_train)} train (40% validation), {len(x_test)} test, "
        f"model local/smollm2, epochs {epochs}, seed {seed}"
    )
    print(
        f"baseline test reward (no examples): {baseline['reward']:.3f}  "
        f"[{baseline_usage.calls} LM calls, {baseline_time:.1f}s]"
    )
    print(
        f"trained  test reward (RandomFewShot): {trained['reward']:.3f}  "
        f"[{after_usage.calls} LM calls]"
    )
    print(f"improvement: {trained['reward'] - baseline['reward']:+.3f}")
    print(
        f"fit: {fit_time:.1f}s wall, {fit_usage.calls} LM calls, {fit_usage.memo_hits} memoised, "
        f"{fit_usage.total_tokens} tokens, {fit_usage.failures} failures; "
        f"val_reward per epoch {history.history.get('val_reward')}"
    )
    examples = program.trainable_variables[0].value["examples"]
    print(
        f"kept {len(examples)} example(s); candidates scored: {len(program.trainable_variables[0].candidates)}"
    )
    print(
        f"reloaded program, same test reward: {again['reward']:.3f} "
        f"({'same' if again == trained else 'DIFFERENT'}), LM calls {reload_usage.calls}, "
        f"cache hits {reload_usage.cache_hits}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.epochs, arguments.seed))
