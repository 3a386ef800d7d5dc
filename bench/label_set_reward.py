"""Free-text label field against a label set, on the TweetEval sentiment sample, local model.

Question it answers: does declaring the dataset's target a label set (the output field a
``Literal["negative", "neutral", "positive"]``, an ``enum`` in its JSON schema, so the local
model's grammar only admits a listed label) raise the test reward, all else equal?

Data: the built-in TweetEval sentiment sample shipped in ``datasets/builtin/tweeteval_sentiment``
(first 300 tweets of the TweetEval sentiment validation split, github.com/cardiffnlp/tweeteval;
Barbieri et al. 2020 and SemEval-2017 Task 4, Rosenthal et al. 2017; research use, see
``datasets/builtin/README.md``). Rows 0..N-1 train, N..2N-1 test (file order, N=24 by default).

Both programs: one Generator on ``local/smollm2`` (temperature 0, max_tokens 32), the same
instructions and the same field description naming the three labels; only the field's type
differs (``str`` vs the label set). Both are trained the same way: RandomFewShot (seed 0,
1 to 3 examples), 1 epoch, batch size 8, validation split 0.25, fit seed 0, and scored with
ExactMatch on the test rows before and after. Also prints how many test answers were a valid
label (free text can answer "Positive", "happy", ...).

Run: .venv/bin/python bench/label_set_reward.py [--rows 24] [--epochs 1] [--seed 0]
Last line: ``label set: free-text A vs label set B`` (test reward after training).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trainboard_local  # noqa: E402,F401  (registers the offline models with the engine)
import training.engine as synalinks  # noqa: E402

DATA = ROOT / "datasets" / "builtin" / "tweeteval_sentiment" / "data.jsonl"
LABELS = ("negative", "neutral", "positive")
DESCRIPTION = "The tweet's sentiment: negative, neutral or positive."
INSTRUCTIONS = "Classify the sentiment of the tweet."


class Tweet(synalinks.DataModel):
    text: str = Field(description="A tweet.")


class FreeText(synalinks.DataModel):
    label: str = Field(description=DESCRIPTION)


class LabelSet(synalinks.DataModel):
    label: Literal["negative", "neutral", "positive"] = Field(description=DESCRIPTION)


def load_rows(count: int) -> tuple[list[dict], list[dict]]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    return rows[:count], rows[count : 2 * count]


def arrays(rows: list[dict], output: type) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([Tweet(text=row["text"]) for row in rows], dtype="object")
    y = np.array([output(label=row["label"]) for row in rows], dtype="object")
    return x, y


async def measure(output: type, train: list[dict], test: list[dict], args) -> dict:
    lm = synalinks.LanguageModel(model="local/smollm2", temperature=0.0, max_tokens=32)
    inputs = synalinks.Input(data_model=Tweet)
    outputs = await synalinks.Generator(
        data_model=output, language_model=lm, instructions=INSTRUCTIONS
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="tweet_sentiment")
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["label"]),
        optimizer=synalinks.optimizers.RandomFewShot(
            nb_min_examples=1, nb_max_examples=3, seed=args.seed
        ),
    )
    x_train, y_train = arrays(train, output)
    x_test, y_test = arrays(test, output)
    before = await program.evaluate(x_test, y_test, batch_size=8)
    started = time.perf_counter()
    await program.fit(
        x_train,
        y_train,
        validation_split=0.25,
        epochs=args.epochs,
        batch_size=8,
        seed=args.seed,
    )
    seconds = time.perf_counter() - started
    after = await program.evaluate(x_test, y_test, batch_size=8)
    predictions = await program.predict(x_test, batch_size=8)
    answers = [p.label if p is not None else None for p in predictions]
    return {
        "before": before["reward"],
        "after": after["reward"],
        "fit_seconds": seconds,
        "valid": sum(1 for answer in answers if answer in LABELS),
        "answers": answers,
    }


async def main(args) -> None:
    train, test = load_rows(args.rows)
    counts = {label: sum(row["label"] == label for row in test) for label in LABELS}
    print(f"TweetEval sentiment sample: {len(train)} train / {len(test)} test rows; test {counts}")
    results = {}
    for name, output in (("free-text", FreeText), ("label set", LabelSet)):
        result = await measure(output, train, test, args)
        results[name] = result
        shown = sorted(
            {a for a in result["answers"] if a is not None}, key=lambda a: (a not in LABELS, a)
        )
        print(
            f"{name:9}: test reward {result['before']:.3f} before -> {result['after']:.3f} after "
            f"RandomFewShot ({args.epochs} epoch, fit {result['fit_seconds']:.0f} s); "
            f"valid labels {result['valid']}/{len(test)}; distinct answers {shown[:8]}"
        )
    print(
        f"label set: free-text {results['free-text']['after']:.3f} "
        f"vs label set {results['label set']['after']:.3f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=24, help="train rows, and as many test rows")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    asyncio.run(main(parser.parse_args()))
