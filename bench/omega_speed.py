"""OMEGA's wall time and quality against RandomFewShot, on the offline local models.

    .venv/bin/python bench/omega_speed.py [--before REV --together] [--seeds 0 1 2] [--roles]
        [--profile] [--jobs 2] [--label-sizes 24 16]

1. Speed. A 40-question short-answer task (24 train / 16 test): each question is a worked
   GSM8K solution (calculator annotations removed, the ``#### N`` line cut off) and the answer
   is its final number written as a bare string ("72", not "72 clips" or "$72"). The 135M model
   cannot do the arithmetic but can read the result off the solution; what it must learn is
   the short answer format, which instructions and examples can teach. ``fit(epochs=3,
   batch_size=8, validation_split=0.25)`` with OMEGA at the guide's defaults (local/smollm2 for
   the program and the mutations, local/minilm for DNS), then with RandomFewShot. Printed per
   optimizer: fit wall time, chat calls, embedding requests, completion tokens, test reward
   before → after. With ``--before REV`` OMEGA also runs from that git revision (checked out in
   a temporary ``git worktree``), in the same bench run, as the baseline.
2. Quality. Two label tasks, OMEGA (the settings the dashboard should default to, see
   ``LABEL_OMEGA``) against RandomFewShot (``LABEL_RFS``: as many candidates as OMEGA makes, a
   comparable number of LM calls) with the same seed, epochs and batch
   size, over ``--seeds``: TweetEval sentiment (negative/neutral/positive; the builtin sample
   of ``datasets/builtin/tweeteval_sentiment``, from ``../shared/data``) and the builtin
   ``demo`` routing task (money/bug/box codes the model cannot guess).

Every configuration runs in its own process (fresh model load, not counted in the fit time:
both optimizers are measured with the models already loaded, as a worker that preloads them
at start serves them). ``--profile`` adds cProfile's top functions and the time and tokens per
LM call role (task predictions, mutation, crossover, embedding) for OMEGA on the QA task.

Data: GSM8K, Cobbe et al. 2021, https://github.com/openai/grade-school-math, MIT licence
(``training/engine/datasets/data/gsm8k``); TweetEval, Barbieri et al. 2020,
https://github.com/cardiffnlp/tweeteval (see ``datasets/builtin/README.md``); ``demo`` is
Trainboard's own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import revisions

ROOT = Path(__file__).resolve().parent.parent
GSM8K = ROOT / "training/engine/datasets/data/gsm8k/train.jsonl"
BUILTIN = ROOT / "datasets/builtin"
QA_ROWS, QA_TRAIN = 40, 24
LABEL_TRAIN, LABEL_TEST = 24, 16
QA_FIT = {"epochs": 3, "batch_size": 8, "validation_split": 0.25}
LABEL_FIT = {"epochs": 2, "batch_size": 8, "validation_split": 0.25}
#: OMEGA on label tasks: few-shot examples on (the guide's default is off; see the report).
LABEL_OMEGA = {"few_shot_learning": True}
#: RandomFewShot on label tasks at a budget comparable to OMEGA's: as many candidates per
#: epoch as OMEGA makes (one per batch), so both score the same number on validation.
LABEL_BATCHES = -(
    -round(LABEL_TRAIN * (1 - LABEL_FIT["validation_split"])) // LABEL_FIT["batch_size"]
)
LABEL_RFS = {"nb_candidates": LABEL_BATCHES}
_CALCULATOR = re.compile(r"<<[^<>]*>>")
MAX_SOLUTION_CHARS = 220


# -- tasks -----------------------------------------------------------------------------------
def qa_rows() -> list[tuple[str, str]]:
    """(worked solution, final answer) for the first QA_ROWS short GSM8K solutions."""
    rows = []
    for line in GSM8K.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        reasoning, _, final = row["answer"].rpartition("####")
        solution = _CALCULATOR.sub("", reasoning).strip()
        if len(solution) <= MAX_SOLUTION_CHARS:
            rows.append((solution, final.strip().replace(",", "")))
        if len(rows) == QA_ROWS:
            break
    return rows


def label_rows(key: str, text_field: str, label_field: str, count: int) -> list[tuple[str, str]]:
    rows = []
    for line in (BUILTIN / key / "data.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if len(row[text_field]) <= 160:
            rows.append((row[text_field], row[label_field]))
        if len(rows) == count:
            break
    return rows


def build_task(name: str, sizes: tuple[int, int] | None = None):
    """(program builder, (x_train, y_train), (x_test, y_test)) of a task, public API only."""
    import numpy as np

    import training.engine as synalinks

    class Question(synalinks.DataModel):
        solution: str

    class ShortAnswer(synalinks.DataModel):
        answer: str

    class Text(synalinks.DataModel):
        text: str

    class Label(synalinks.DataModel):
        label: str

    if name == "qa":
        rows, train = qa_rows(), QA_TRAIN
        x = [Question(solution=s) for s, _ in rows]
        y = [ShortAnswer(answer=a) for _, a in rows]
        in_model, out_model, field = Question, ShortAnswer, "answer"
        instructions = "Give the final answer of the worked solution."
    else:
        key, text_field, label_field = {
            "tweeteval": ("tweeteval_sentiment", "text", "label"),
            "routing": ("demo", "message", "team"),
        }[name]
        train, test = sizes or (LABEL_TRAIN, LABEL_TEST)
        rows = label_rows(key, text_field, label_field, train + test)
        x = [Text(text=t) for t, _ in rows]
        y = [Label(label=label) for _, label in rows]
        in_model, out_model, field = Text, Label, "label"
        instructions = (
            "Classify the sentiment of the tweet."
            if name == "tweeteval"
            else "Route the customer message to the team that handles it."
        )

    async def program(lm, optimizer):
        inputs = synalinks.Input(data_model=in_model)
        outputs = await synalinks.Generator(
            data_model=out_model, language_model=lm, instructions=instructions
        )(inputs)
        built = synalinks.Program(inputs=inputs, outputs=outputs, name=f"bench_{name}")
        built.compile(reward=synalinks.rewards.ExactMatch(in_mask=[field]), optimizer=optimizer)
        return built

    array = lambda items: np.array(items, dtype="object")  # noqa: E731
    return program, (array(x[:train]), array(y[:train])), (array(x[train:]), array(y[train:]))


# -- one configuration (a child process) -----------------------------------------------------
class RoleTimer:
    """Wall time, calls and completion tokens per LM call role (profiling only: wraps the
    optimizer's methods in this process)."""

    def __init__(self):
        self.roles: dict[str, dict[str, float]] = {}

    def wrap(self, owner, attribute: str, role: str) -> None:
        import training.engine as synalinks

        original = getattr(owner, attribute)
        timer = self

        async def timed(*args, **kwargs):
            started = time.perf_counter()
            with synalinks.usage.track() as usage:
                try:
                    return await original(*args, **kwargs)
                finally:
                    entry = timer.roles.setdefault(
                        role, {"n": 0, "seconds": 0.0, "calls": 0, "completion_tokens": 0}
                    )
                    entry["n"] += 1
                    entry["seconds"] += time.perf_counter() - started
                    entry["calls"] += usage.calls
                    entry["completion_tokens"] += usage.completion_tokens

        setattr(owner, attribute, timed)


async def run_config(spec: dict) -> dict:
    import training.engine as synalinks
    from trainboard_local import minilm, smollm2  # registers the offline models with the engine
    from training.engine.optimizers import OMEGA, RandomFewShot

    lm = synalinks.LanguageModel(model="local/smollm2")
    em = synalinks.EmbeddingModel(model="local/minilm")

    started = time.perf_counter()

    smollm2.complete([{"role": "user", "content": "hi"}], max_tokens=1)
    minilm.embed(["warm up"])
    load_seconds = time.perf_counter() - started

    build, (x_train, y_train), (x_test, y_test) = build_task(spec["task"], spec.get("sizes"))
    if spec["optimizer"] == "omega":
        optimizer = OMEGA(
            language_model=lm, embedding_model=em, seed=spec["seed"], **spec.get("params", {})
        )
    else:
        optimizer = RandomFewShot(seed=spec["seed"], **spec.get("params", {}))
    program = await build(lm, optimizer)
    before = (await program.evaluate(x_test, y_test, batch_size=16))["reward"]

    timer = RoleTimer()
    profiler = None
    if spec.get("profile") or spec.get("roles"):
        from training.engine.optimizers import mutation
        from training.engine.optimizers.optimizer import Optimizer

        timer.wrap(mutation.VariableEvolver, "mutate", "mutation")
        timer.wrap(mutation.VariableEvolver, "crossover", "crossover")
        timer.wrap(Optimizer, "score", "candidate scoring")
        timer.wrap(OMEGA, "compete", "competition (embedding + DNS)")
    if spec.get("profile"):
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    with synalinks.usage.track() as usage:
        started, cpu_started = time.perf_counter(), time.process_time()
        history = await program.fit(x_train, y_train, seed=spec["seed"], **spec["fit"])
        fit_seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu_started
    if profiler is not None:
        profiler.disable()
    after = (await program.evaluate(x_test, y_test, batch_size=16))["reward"]
    result = {
        **spec,
        "load_seconds": round(load_seconds, 1),
        "fit_seconds": round(fit_seconds, 1),
        "fit_cpu_seconds": round(cpu_seconds, 1),
        "calls": usage.calls,
        "embedding_calls": usage.embedding_calls,
        "completion_tokens": usage.completion_tokens,
        "before": before,
        "after": after,
        "val_reward": [round(v, 3) for v in history.history.get("val_reward", [])],
        "beat_seed": getattr(optimizer, "candidates_beating_seed", None),
        "unchanged": getattr(optimizer, "unchanged_operations", None),
        "score_reuses": getattr(optimizer, "score_reuses", None),
    }
    if timer.roles:
        result["roles"] = timer.roles
    if profiler is not None:
        import io
        import pstats

        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
        result["cprofile"] = out.getvalue()
    return result


# -- the driver --------------------------------------------------------------------------------


def start(spec: dict, code_root: Path):
    """Start one configuration in a fresh process with ``code_root`` as the engine's source."""
    return revisions.start(__file__, spec, code_root, "OMEGA_BENCH_CODE_ROOT")


def child(spec: dict, code_root: Path) -> dict:
    return revisions.finish(start(spec, code_root))


def line(result: dict, label: str) -> str:
    return (
        f"{label:<28} fit {result['fit_seconds']:>6.1f} s ({result['fit_cpu_seconds']:.0f} s CPU) | "
        f"{result['calls']:>4} chat calls | "
        f"{result['embedding_calls']:>2} embedding req | {result['completion_tokens']:>6} tokens "
        f"generated | test {result['before']:.3f} -> {result['after']:.3f} | val "
        f"{result['val_reward']} | load {result['load_seconds']} s"
    )


def print_profile(result: dict) -> None:
    print(f"  time per LM call role ({result['fit_seconds']} s of fit):")
    for role, entry in result["roles"].items():
        tokens = entry["completion_tokens"] / max(1, entry["calls"])
        print(
            f"    {role:<30} {entry['n']:>3}x  {entry['seconds']:>7.1f} s  "
            f"{entry['calls']:>3} calls  {tokens:>6.0f} tokens/call"
        )
    if "cprofile" not in result:
        return
    print("  cProfile (cumulative, top 25):")
    for text in result["cprofile"].splitlines()[:45]:
        print("    " + text)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", default=None, help="git revision of the baseline OMEGA")
    parser.add_argument(
        "--recorded-before",
        type=float,
        default=None,
        help="a recorded baseline fit time (s) when --before is not given",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--profile", action="store_true", help="per-role times and cProfile")
    parser.add_argument(
        "--roles", action="store_true", help="per-role times only (no cProfile overhead)"
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="label-task configurations run at once (with QA)"
    )
    parser.add_argument(
        "--label-sizes",
        type=int,
        nargs=2,
        metavar=("TRAIN", "TEST"),
        default=None,
        help=f"label task rows (default {LABEL_TRAIN} {LABEL_TEST})",
    )
    parser.add_argument("--skip-labels", action="store_true")
    parser.add_argument(
        "--together",
        action="store_true",
        help="run the baseline and this tree's OMEGA at the same time (same background load)",
    )
    parser.add_argument("--skip-qa", action="store_true")
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        sys.path.insert(0, os.environ.get("OMEGA_BENCH_CODE_ROOT", str(ROOT)))
        print(json.dumps(asyncio.run(run_config(json.loads(args.run)))))
        return

    # The label-task configurations start first, ``--jobs`` at a time, and run while the QA
    # task does (rewards do not depend on timing; the QA before/after pair shares one load).
    label_specs = []
    sizes = tuple(args.label_sizes) if args.label_sizes else (LABEL_TRAIN, LABEL_TEST)
    if not args.skip_labels:
        for task in ("tweeteval", "routing"):
            for seed in args.seeds:
                spec = {"task": task, "seed": seed, "fit": LABEL_FIT, "sizes": sizes}
                label_specs.append({**spec, "optimizer": "omega", "params": LABEL_OMEGA})
                label_specs.append({**spec, "optimizer": "rfs", "params": LABEL_RFS})
    pool = ThreadPoolExecutor(max_workers=max(1, args.jobs))
    label_futures = [pool.submit(child, spec, ROOT) for spec in label_specs]

    omega_after = omega_before = None
    if not args.skip_qa:
        print(
            "== QA task: 24 train / 16 test, fit(epochs=3, batch_size=8, validation_split=0.25) =="
        )
        roles = args.profile or args.roles
        qa = {"task": "qa", "seed": 0, "fit": QA_FIT, "profile": args.profile, "roles": roles}
        if args.before:
            # Both at once: on a shared machine they then see the same background load.
            baseline_root = revisions.worktree(args.before, "omega-before-")
            try:
                running = start({**qa, "optimizer": "omega"}, baseline_root)
                if args.together:
                    omega_after = child({**qa, "optimizer": "omega"}, ROOT)
                omega_before = revisions.finish(running)
            finally:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline_root)],
                    capture_output=True,
                )
            print(line(omega_before, f"OMEGA @ {args.before}"))
            if roles:
                print_profile(omega_before)
        if omega_after is None:
            omega_after = child({**qa, "optimizer": "omega"}, ROOT)
        print(line(omega_after, "OMEGA (this tree)"))
        if roles:
            print_profile(omega_after)
        rfs = child({**qa, "optimizer": "rfs", "profile": False, "roles": False}, ROOT)
        print(line(rfs, "RandomFewShot"))
        print(
            f"OMEGA: {omega_after['beat_seed']} candidates beat the seed; "
            f"{omega_after['unchanged']} operator calls gave a parent back; "
            f"{omega_after['score_reuses']} scorings reused"
        )

    omega_mean = rfs_mean = None
    if label_specs:
        results = [future.result() for future in label_futures]
        scores: dict[str, list[float]] = {"omega": [], "rfs": []}
        for task in ("tweeteval", "routing"):
            print(f"\n== label task {task}: {sizes[0]} train / {sizes[1]} test, {LABEL_FIT} ==")
            for result in results:
                if result["task"] != task:
                    continue
                label = (
                    f"seed {result['seed']} OMEGA {LABEL_OMEGA}"
                    if result["optimizer"] == "omega"
                    else f"seed {result['seed']} RandomFewShot {LABEL_RFS}"
                )
                print(line(result, label))
                scores[result["optimizer"]].append(result["after"])
        omega_mean = statistics.mean(scores["omega"])
        rfs_mean = statistics.mean(scores["rfs"])
        pairs = [(o["after"], r["after"]) for o, r in zip(results[::2], results[1::2], strict=True)]
        print(
            f"label tasks, mean test reward after fit: OMEGA {omega_mean:.3f}, RFS {rfs_mean:.3f}; "
            f"OMEGA >= RFS in {sum(o >= r for o, r in pairs)} of {len(pairs)} (task, seed) pairs"
        )
    pool.shutdown()

    was = omega_before["fit_seconds"] if omega_before else args.recorded_before
    print(
        f"omega: fit {omega_after['fit_seconds'] if omega_after else float('nan'):.1f} s "
        f"(was {was if was is not None else float('nan'):.1f} s), "
        f"{omega_after['calls'] if omega_after else 0} calls; label tasks omega "
        f"{omega_mean if omega_mean is not None else float('nan'):.3f} vs rfs "
        f"{rfs_mean if rfs_mean is not None else float('nan'):.3f}"
    )


if __name__ == "__main__":
    main()
