"""Does a held-out selection split pick a program that does better on test?

Question: OMEGA scores many candidates on one small validation set and keeps the best there,
partly the luckiest. With ``fit(selection_split=...)`` the top ``final_selection.TOP_K``
validation candidates (and the seed) are scored once more on rows no candidate was chosen
on, and the best there is kept. Is its **test** reward higher than the validation-best's?
And how many candidates are worth choosing between on cost (prompt tokens per call) and
quality (validation reward)?

Data (in the repository, nothing read from ../shared):
``datasets/builtin/tweeteval_sentiment/data.jsonl``, the first 300 tweets of the TweetEval
sentiment validation split (github.com/cardiffnlp/tweeteval; Barbieri et al. 2020 and
SemEval-2017 Task 4, Rosenthal et al. 2017; research use, see ``datasets/builtin/README.md``).
Label ``negative | neutral | positive``. File order: the first ``--train`` rows train, the next
``--validation`` validate, the next ``--selection`` are the selection split, the next
``--test`` test; the same rows for every seed.

Program: one Generator on ``local/smollm2`` (temperature 0, max_tokens 32, no response cache:
see ``task_model``), instructions naming the task but not the labels, the output a ``Literal`` (grammar-
constrained), ExactMatch. OMEGA: few-shot on (1-3 examples), DNS on ``local/minilm``,
mutations on ``local/smollm2`` with ``max_tokens=384`` (as ``bench/learning.py``); fit seed =
optimizer seed = the seed; batch size 8.

With and without a selection split, in one fit per seed: the selection rows are cut off
the end of ``x`` *before* anything else (``validation_data`` is given explicitly), so the
training rows, the validation rows, every candidate and every score are the same with or
without the split (temperature 0, same seed); the split changes only the final choice, at
train end. So the baseline "without" — the validation-best candidate, which is what fit keeps
without a selection split (``final_selection`` event ``validation_best_id``) — is evaluated on
test from the same fit rather than fitted again (``--check-without`` fits it again and checks
that it keeps that very candidate).

Per seed: the chosen candidate's validation, selection and test rewards; the validation-best's
test reward; the candidates on the reward/prompt-tokens front; and one ablation of the chosen
program (as the run page's "ablate" does it: ``training.insight.ablation``):
its first few-shot example taken out (its last instruction sentence when it has none), scored
on the validation rows, its effect a paired bootstrap against the chosen candidate's stored
validation rewards; ``ablation calls`` counts the LM calls those scorings made (each printed next to the forecast
rule's count, ``forecast.evaluation_calls``).

Run: nice -n 5 .venv/bin/python bench/selection.py [--seeds 0 1 2] [--check-without]
Last line: ``selection: test of chosen A (validation-best V), ablation calls C, pareto P of N
candidates`` (A and V: means over seeds; P and N: summed over seeds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from learning import local_omega  # noqa: E402  (bench/ is the script's folder)

import trainboard_local  # noqa: E402,F401  (registers the offline models with the engine)
import training.engine as synalinks  # noqa: E402
from training.engine.optimizers import final_selection  # noqa: E402
from training.engine.utils.paired_bootstrap import paired_bootstrap  # noqa: E402
from training.engine.utils.pareto import non_dominated  # noqa: E402
from training.forecasting import forecast  # noqa: E402

DATA = ROOT / "datasets" / "builtin" / "tweeteval_sentiment" / "data.jsonl"
INSTRUCTIONS = "Classify the sentiment of the tweet."


class Tweet(synalinks.DataModel):
    text: str = Field(description="A tweet.")


class TweetSentiment(synalinks.DataModel):
    label: Literal["negative", "neutral", "positive"] = Field(description="The tweet's sentiment.")


class Events(synalinks.callbacks.Callback):
    """Keeps every engine event of a fit."""

    def __init__(self):
        super().__init__()
        self.events: list[dict] = []

    async def on_event(self, event):
        self.events.append(event)

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e.get("type") == kind]


def arrays(rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([Tweet(text=r["text"]) for r in rows], dtype=object)
    y = np.array([TweetSentiment(label=r["label"]) for r in rows], dtype=object)
    return x, y


async def build(lm, optimizer):
    inputs = synalinks.Input(data_model=Tweet)
    outputs = await synalinks.Generator(
        data_model=TweetSentiment, language_model=lm, instructions=INSTRUCTIONS
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="selection")
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["label"]), optimizer=optimizer)
    return program


async def fit_once(rows, seed, lm, em, args, selection: bool):
    train, validation, held_out, _ = rows
    program = await build(lm, local_omega(seed, em))
    x, y = arrays(train + (held_out if selection else []))
    x_val, y_val = arrays(validation)
    events = Events()
    started = time.perf_counter()
    await program.fit(
        x,
        y,
        validation_data=(x_val, y_val),
        selection_split=len(held_out) / (len(train) + len(held_out)) if selection else 0.0,
        epochs=args.epochs,
        batch_size=8,
        seed=seed,
        callbacks=[events],
    )
    return program, events, time.perf_counter() - started


async def test_reward(program, value, x_test, y_test) -> float:
    variable = program.trainable_variables[0]
    kept = variable.value
    variable.assign(value)
    try:
        return (await program.evaluate(x_test, y_test, batch_size=8))["reward"]
    finally:
        variable.assign(kept)


def without_one_part(value: dict) -> tuple[str, dict]:
    """(what was taken out, the value without it): the first example, else the last sentence."""
    value = dict(value)
    if value.get("examples"):
        value["examples"] = list(value["examples"])[1:]
        return "first example", value
    parts = [p for p in re.split(r"(?<=[.!?])\s+|\n+", value.get("instructions") or "") if p]
    value["instructions"] = " ".join(parts[:-1])
    return "last sentence", value


async def ablate(program, value: dict, baseline: list[float], x_val, y_val) -> dict:
    """One ablation of the chosen value on the validation rows (see the module docstring)."""
    part, ablated = without_one_part(value)
    variable = program.trainable_variables[0]
    kept = variable.value
    variable.assign(ablated)
    per_example = synalinks.callbacks.ExampleRewards()
    try:
        with synalinks.usage.track() as usage:
            await program.evaluate(x_val, y_val, batch_size=8, callbacks=[per_example])
    finally:
        variable.assign(kept)
    paired = paired_bootstrap(baseline, per_example.rewards)
    return {
        "part": part,
        "calls": usage.calls,
        "forecast": forecast.evaluation_calls(len(x_val)),
        "difference": round(paired.difference, 4),
        "interval": [round(paired.low, 4), round(paired.high, 4)],
    }


def task_model():
    """The program's model, without a response cache: the in-memory cache is shared by the
    process, so it answered seed 1's scoring of the seed from seed 0's, and a cached answer is
    no call: that candidate's prompt tokens and latency per call went unmeasured. (Within a
    fit the engine's prediction memo still answers a repeated input.)"""
    return synalinks.LanguageModel(model="local/smollm2", temperature=0.0, max_tokens=32)


async def run_seed(rows, seed, em, args) -> dict:
    lm = task_model()
    x_test, y_test = arrays(rows[3])
    program, events, seconds = await fit_once(rows, seed, lm, em, args, selection=True)
    [final] = events.of("final_selection")
    values, rewards, costs, selection_rewards, per_example = {}, {}, {}, {}, {}
    for event in events.of("candidate"):
        cid = event["candidate_id"]
        values[cid] = event["value"]
        if event.get("example_rewards"):
            per_example[cid] = event["example_rewards"]
        if event.get("reward") is not None:
            rewards[cid] = event["reward"]
        if event.get("prompt_tokens_per_call") is not None:
            costs[cid] = event["prompt_tokens_per_call"]
        if event.get("selection_reward") is not None:
            selection_rewards[cid] = event["selection_reward"]
    chosen, best = final["chosen_id"], final["validation_best_id"]
    chosen_test = await test_reward(program, values[chosen], x_test, y_test)
    best_test = (
        chosen_test if best == chosen else await test_reward(program, values[best], x_test, y_test)
    )
    x_val, y_val = arrays(rows[1])
    ablation = await ablate(program, values[chosen], per_example[chosen], x_val, y_val)
    costed = [cid for cid in rewards if cid in costs]
    front = non_dominated([(costs[c], rewards[c]) for c in costed])
    result = {
        "seed": seed,
        "fit_seconds": round(seconds, 1),
        "candidates": len(rewards),
        "contenders": final["contenders"],
        "chosen": chosen,
        "validation_best": best,
        "chosen_validation": rewards[chosen],
        "chosen_selection": selection_rewards.get(chosen),
        "chosen_test": chosen_test,
        "validation_best_validation": rewards[best],
        "validation_best_selection": selection_rewards.get(best),
        "validation_best_test": best_test,
        "pareto": sum(front),
        "pareto_ids": [c for c, flag in zip(costed, front, strict=True) if flag],
        "prompt_tokens": {c: costs[c] for c in costed},
        "ablation": ablation,
    }
    if args.check_without:
        plain, plain_events, _ = await fit_once(rows, seed, lm, em, args, selection=False)
        kept = [e["candidate_id"] for e in plain_events.of("candidate") if e["status"] == "best"]
        result["without_keeps"] = kept
        result["without_matches"] = kept == [best]
    return result


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


async def main(args) -> None:
    lines = [line for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    data = [json.loads(line) for line in lines]
    sizes = [args.train, args.validation, args.selection, args.test]
    if sum(sizes) > len(data):
        raise SystemExit(f"{DATA}: {len(data)} rows, {sum(sizes)} needed")
    rows, start = [], 0
    for size in sizes:
        rows.append(data[start : start + size])
        start += size
    em = synalinks.EmbeddingModel(model="local/minilm")
    print(
        f"rows: train {args.train}, validation {args.validation}, selection {args.selection}, "
        f"test {args.test}; OMEGA {args.epochs} epoch(s), batch 8; top_k "
        f"{final_selection.TOP_K} + seed scored on selection",
        flush=True,
    )
    started = time.perf_counter()
    results = []
    for seed in args.seeds:
        result = await run_seed(rows, seed, em, args)
        results.append(result)
        print(
            f"seed {seed}: chosen {result['chosen']} validation {result['chosen_validation']:.3f} "
            f"selection {result['chosen_selection']:.3f} test {result['chosen_test']:.3f} | "
            f"validation-best {result['validation_best']} validation "
            f"{result['validation_best_validation']:.3f} selection "
            f"{result['validation_best_selection']:.3f} test {result['validation_best_test']:.3f}"
            f" | pareto {result['pareto']} of {result['candidates']} | fit {result['fit_seconds']}"
            f" s | ablation of the {result['ablation']['part']}: "
            f"{result['ablation']['difference']:+.3f} {result['ablation']['interval']}, "
            f"{result['ablation']['calls']} calls (forecast {result['ablation']['forecast']})",
            flush=True,
        )
        print("  " + json.dumps(result), flush=True)
    chosen = mean([r["chosen_test"] for r in results])
    best = mean([r["validation_best_test"] for r in results])
    differs = sum(r["chosen"] != r["validation_best"] for r in results)
    print(
        f"selection split changed the choice in {differs} of {len(results)} seeds; test "
        f"difference chosen − validation-best {chosen - best:+.3f}; total "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    if args.check_without:
        print(
            "without a selection split fit kept the validation-best in "
            f"{sum(bool(r.get('without_matches')) for r in results)} of {len(results)} seeds"
        )
    ablation_calls = sum(r["ablation"]["calls"] for r in results)
    pareto = sum(r["pareto"] for r in results)
    candidates = sum(r["candidates"] for r in results)
    print(
        f"selection: test of chosen {chosen:.3f} (validation-best {best:.3f}), ablation calls "
        f"{ablation_calls}, "
        f"pareto {pareto} of {candidates} candidates"
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--train", type=int, default=16)
    parser.add_argument("--validation", type=int, default=12)
    parser.add_argument("--selection", type=int, default=12)
    parser.add_argument("--test", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--check-without", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
