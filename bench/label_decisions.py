"""How a label decision learns on many draws: the LM's label scores replayed, no LM call per draw.

Question it answers: across many draws of about 100 training rows (more than
``bench/learning.py`` can afford with the LM in the loop), how well does CalibratedLabels'
decision name the label on test, how often does the beyond-noise rule let it replace the
seed, and what does the user end with? The baseline, measured in the same run, is the
decision without the embedding read-out (the LM's scores, a bias and the nearest rows' vote:
what ``fit_decision`` learns when it is given no vectors).

How: the local model's label scores (the bench's seed prompt, ``score_labels``) and the MiniLM
vector of every row of the four TweetEval tasks are computed once and kept under
``var/bench/label_scores/`` (about 11 minutes on 2 cores; ``--fresh`` recomputes). Each draw
splits a task as ``bench/learning.py`` does (its seeded shuffle, 100 train rows of which the
last 20 validate, the next 150 test), fits the engine's own ``label_decision.fit_decision``
on the 80 fitting rows, and judges it as ``CalibratedLabels`` does: its evidence is the 20
validation rows plus the 80 fitting rows each predicted by a decision fitted without its fold
(5 folds), paired with the seed's answers (the LM's best label), through the engine's
``paired_bootstrap``; the candidate replaces the seed only when that interval lies above 0.

Run: nice -n 5 .venv/bin/python bench/label_decisions.py [--draws 15] [--tasks sentiment ...]
Last line: ``label decisions: candidate C (baseline B), after the rule F (baseline G); kNN K,
majority M; adopted A of N (baseline D)`` (means over the tasks and draws).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import learning  # noqa: E402  (bench/learning.py: its tasks, prompts and splits)

import trainboard_local  # noqa: E402,F401  (registers the offline models with the engine)
from training.engine.modules import example_retrieval as retrieval  # noqa: E402
from training.engine.modules import label_decision, label_readout  # noqa: E402
from training.engine.utils.paired_bootstrap import paired_bootstrap  # noqa: E402

CACHE = ROOT / "var" / "bench" / "label_scores"
FIT_ROWS, VALIDATION_ROWS, TEST_ROWS = 80, 20, 150
FOLDS = 5


async def dump(task: str) -> None:
    """Every row's LM label scores and unit MiniLM vector, once."""
    import training.engine as synalinks

    path, in_field, out_field, _ = learning.TASKS[task]
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    labels = sorted({row[out_field] for row in rows})
    inputs, outputs = learning.models(task, labels)
    lm = synalinks.LanguageModel(model="local/smollm2", temperature=0.0)
    em = synalinks.EmbeddingModel(model="local/minilm")
    program = await learning.build(task, lm, inputs, outputs)
    generator = next(m for m in program.modules if hasattr(m, "label_field"))
    texts = [retrieval.retrieval_text({in_field: row[in_field]}) for row in rows]
    vectors = np.array(await em(texts), dtype=np.float64)
    limit = asyncio.Semaphore(4)

    async def scores_of(row):
        async with limit:
            messages = generator.format_messages({in_field: row[in_field]}, [], "")
            return (await lm.score_labels(messages, outputs, out_field, labels)).scores

    scores = np.array(await asyncio.gather(*[scores_of(row) for row in rows]))
    truth = np.array([labels.index(row[out_field]) for row in rows])
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(CACHE / f"{task}.npz", vectors=vectors, scores=scores, truth=truth)


def neighbour_counts(queries, pool, pool_truth, count, ks, leave_self_out=False):
    similarity = queries @ pool.T
    if leave_self_out:
        np.fill_diagonal(similarity, -np.inf)
    order = np.argsort(-similarity, axis=1, kind="stable")
    found = {}
    for k in ks:
        counts = np.zeros((len(queries), count))
        for row in range(len(queries)):
            for index in order[row, :k]:
                counts[row, pool_truth[index]] += 1
        found[k] = counts
    return found


def decide(scores, vectors, truth, query_scores, query_vectors, count, seed, with_readout):
    """The labels a decision fitted on (scores, vectors, truth) names for the queries."""
    labels = [str(i) for i in range(count)]
    ks = [k for k in label_decision.VOTE_KS if k < len(truth)]
    fitted = label_decision.fit_decision(
        labels,
        "label",
        scores,
        np.eye(count)[truth],
        neighbour_counts(vectors, vectors, truth, count, ks, leave_self_out=True),
        seed=seed,
        vectors=vectors if with_readout else None,
        embedding_model="local/minilm",
    )
    k = fitted.vote_k
    counts = neighbour_counts(query_vectors, vectors, truth, count, [k])[k] if k else None
    readout = None
    if fitted.decision.get("readout"):
        weights, intercepts = label_readout.from_json(fitted.decision["readout"], labels)
        readout = label_readout.readout_scores(weights, intercepts, query_vectors)
    return np.array(
        [
            label_decision.decide(
                query_scores[i],
                labels,
                fitted.decision,
                None if counts is None else counts[i],
                k,
                None if readout is None else readout[i],
            )[0]
            for i in range(len(query_scores))
        ]
    )


def draw(task, data, seed, with_readout) -> dict[str, float]:
    vectors, scores, truth = data["vectors"], data["scores"], data["truth"]
    count = int(truth.max()) + 1
    order = list(range(len(truth)))
    random.Random(f"{task}-{seed}").shuffle(order)  # bench/learning.py's split
    fit = np.array(order[:FIT_ROWS])
    validation = np.array(order[FIT_ROWS : FIT_ROWS + VALIDATION_ROWS])
    test = np.array(order[FIT_ROWS + VALIDATION_ROWS : FIT_ROWS + VALIDATION_ROWS + TEST_ROWS])

    def fitted_on(rows, queries):
        return decide(scores[rows], vectors[rows], truth[rows], scores[queries],
                      vectors[queries], count, seed, with_readout)  # fmt: skip

    crossed = np.zeros(len(fit), dtype=int)
    folds = list(range(len(fit)))
    random.Random(seed).shuffle(folds)
    for f in range(FOLDS):
        held = sorted(folds[f::FOLDS])
        rest = sorted(set(range(len(fit))) - set(held))
        crossed[held] = fitted_on(fit[rest], fit[held])
    seed_answer = scores.argmax(axis=1)
    before = [*(seed_answer[validation] == truth[validation]), *(seed_answer[fit] == truth[fit])]
    after = [*(fitted_on(fit, validation) == truth[validation]), *(crossed == truth[fit])]
    adopted = paired_bootstrap([float(v) for v in before], [float(v) for v in after]).low > 0
    candidate = float((fitted_on(fit, test) == truth[test]).mean())
    seed_reward = float((seed_answer[test] == truth[test]).mean())
    train = np.array(order[: FIT_ROWS + VALIDATION_ROWS])
    majority = np.bincount(truth[train], minlength=count).argmax()
    knn = neighbour_counts(vectors[test], vectors[fit], truth[fit], count, [learning.KNN_K])
    return {
        "seed": seed_reward,
        "candidate": candidate,
        "final": candidate if adopted else seed_reward,
        "adopted": float(adopted),
        "majority": float((truth[test] == majority).mean()),
        "knn": float((knn[learning.KNN_K].argmax(axis=1) == truth[test]).mean()),
    }


def main(args) -> None:
    totals: dict[str, list[float]] = {}
    for task in args.tasks:
        if args.fresh or not (CACHE / f"{task}.npz").exists():
            print(f"{task}: scoring every row once on local/smollm2 ...", flush=True)
            asyncio.run(dump(task))
        data = np.load(CACHE / f"{task}.npz")
        data = {
            **data,
            "vectors": data["vectors"] / np.linalg.norm(data["vectors"], axis=1, keepdims=True),
        }
        for name, with_readout in (("baseline", False), ("read-out", True)):
            found = [draw(task, data, seed, with_readout) for seed in range(args.draws)]
            means = {key: statistics.fmean(d[key] for d in found) for key in found[0]}
            print(
                f"{task:16} {name:9} seed {means['seed']:.3f} candidate {means['candidate']:.3f} "
                f"after the rule {means['final']:.3f} (adopted {means['adopted'] * args.draws:.0f}"
                f" of {args.draws}); kNN {means['knn']:.3f}, majority {means['majority']:.3f}",
                flush=True,
            )
            for key, value in means.items():
                totals.setdefault(f"{name}/{key}", []).append(value)

    def mean(key: str) -> float:
        return statistics.fmean(totals[key])

    draws = args.draws * len(args.tasks)
    print(
        f"label decisions: candidate {mean('read-out/candidate'):.3f} (baseline "
        f"{mean('baseline/candidate'):.3f}), after the rule {mean('read-out/final'):.3f} "
        f"(baseline {mean('baseline/final'):.3f}); kNN {mean('read-out/knn'):.3f}, majority "
        f"{mean('read-out/majority'):.3f}; adopted {mean('read-out/adopted') * draws:.0f} of "
        f"{draws} (baseline {mean('baseline/adopted') * draws:.0f})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", nargs="+", default=list(learning.PUBLIC), choices=learning.PUBLIC
    )
    parser.add_argument("--draws", type=int, default=15)
    parser.add_argument("--fresh", action="store_true", help="score every row again")
    main(parser.parse_args())
