"""How sure each candidate's score is, and what it costs: the run page's "Selection" section.

Why: a leaderboard of mean validation rewards ranks candidates by numbers that, on a small
validation set, move by a whole example's worth with luck. Every scored candidate stores each
validation example's reward (``Candidate.example_rewards``), so this presenter can say, on
the *same* examples:

- its reward with a bootstrap interval (the engine's ``paired_bootstrap`` against zeros: the
  percentile interval of the mean);
- whether it is better than its parent and than the seed: ``yes`` when the paired interval of
  the difference lies above 0, ``worse`` below, else ``within noise``;
- whether a win (the run's chosen candidate, or any that scored above the seed) is within
  noise: marked, so a reader does not take a lucky candidate for progress;
- its prompt tokens and seconds per call (measured while it was scored), whether it is on the
  reward-vs-prompt-tokens front (``utils.pareto``), and whether it is within noise of the
  best while cheaper: those get "use this one".

With a selection split, each contender's selection reward is laid next to its validation
reward (the page plots one against the other: overfitting to validation shows as points
right of the diagonal).

Pure reads; nothing is written. Intervals use ``RESAMPLES`` (seeded, so a reload shows the
same figures).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from training.engine.optimizers import final_selection
from training.engine.utils.paired_bootstrap import paired_bootstrap
from training.engine.utils.pareto import non_dominated
from training.models import Candidate, Run

#: Bootstrap resamples per interval on this page (the test difference uses the engine's
#: default 10,000; here up to three intervals per candidate are drawn per page view).
RESAMPLES = 2000
#: Most candidates the section lists and plots (the highest validation rewards).
MAX_ROWS = 200
CONFIDENCE = 0.95
#: Bootstraps kept drawn, by the rewards they were drawn from (seeded: the same rewards give
#: the same interval). A candidate's rewards never change once it is scored, and the section
#: is drawn again at each candidate event of a live run, so each update draws only the new
#: candidates' intervals and verdicts (up to four a candidate), not every candidate's again.
#: At most MAX_EXAMPLE_REWARDS (1,000) rewards a side: 16 MB at worst, ~1 MB on a typical run.
BOOTSTRAPS_KEPT = 1024


@dataclass
class Verdict:
    """A paired comparison on the same examples: ``word`` is ``yes``, ``worse`` or
    ``within noise``; ``difference``/``low``/``high`` the mean difference and its interval."""

    word: str
    difference: float
    low: float
    high: float
    n: int

    @property
    def within_noise(self) -> bool:
        return self.word == "within noise"


@dataclass
class Row:
    """One scored candidate as the section shows it."""

    candidate: Candidate
    reward: float
    n: int = 0
    low: float | None = None
    high: float | None = None
    vs_parent: Verdict | None = None
    vs_seed: Verdict | None = None
    vs_best: Verdict | None = None
    selection_reward: float | None = None
    contender: bool = False
    pareto: bool = False
    cheaper_within_noise: bool = False
    win_within_noise: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def prompt_tokens(self) -> float | None:
        return self.candidate.prompt_tokens_per_call

    @property
    def latency(self) -> float | None:
        return self.candidate.latency_per_call


def verdict(before: list[float], after: list[float]) -> Verdict | None:
    """``after`` against ``before`` on the same examples (None when they are not paired)."""
    if not before or len(before) != len(after):
        return None
    result = _bootstrap(before, after)
    word = "within noise" if result.within_noise else ("yes" if result.low > 0 else "worse")
    return Verdict(word, result.difference, result.low, result.high, result.n)


def interval(rewards: list[float]) -> tuple[float, float] | None:
    """The bootstrap interval of the mean of ``rewards`` (None without any)."""
    if not rewards:
        return None
    result = _bootstrap([0.0] * len(rewards), rewards)
    return result.low, result.high


def _bootstrap(before: list[float], after: list[float]) -> Any:
    """``paired_bootstrap`` of the page's level and resamples, drawn once per pair of reward
    lists (``BOOTSTRAPS_KEPT``)."""
    return _drawn(_as_key(before), _as_key(after))


def _as_key(rewards: list[float]) -> bytes:
    return np.asarray(rewards, dtype=np.float64).tobytes()


@functools.lru_cache(maxsize=BOOTSTRAPS_KEPT)
def _drawn(before: bytes, after: bytes) -> Any:
    return paired_bootstrap(
        np.frombuffer(before), np.frombuffer(after), confidence=CONFIDENCE, resamples=RESAMPLES
    )


def mark_noise_wins(run: Run, candidates: list[Candidate]) -> list[Candidate]:
    """Set ``win_within_noise`` on each of ``candidates`` (the leaderboard's rows): it scored
    above its variable's seed, yet the paired interval of that gain includes 0. One bootstrap
    per such candidate; the seeds are read once."""
    seeds = {c.variable: c for c in run.candidates.filter(operation="seed").exclude(reward=None)}
    for candidate in candidates:
        seed = seeds.get(candidate.variable)
        candidate.win_within_noise = False
        if seed is None or candidate.pk == seed.pk or candidate.reward is None:
            continue
        if candidate.reward > seed.reward:
            result = verdict(
                list(seed.example_rewards or []), list(candidate.example_rewards or [])
            )
            candidate.win_within_noise = result is not None and result.within_noise
    return candidates


def _rows(run: Run) -> list[Candidate]:
    return list(run.candidates.exclude(reward=None).order_by("-reward", "epoch", "id")[:MAX_ROWS])


def report(run: Run) -> dict[str, Any]:
    """The section's context: ``rows`` (best validation reward first), ``points`` (chart data,
    JSON-ready), ``final`` (the selection split's choice per variable), counts and the split
    the rewards are on."""
    candidates = _rows(run)
    by_key = {(c.variable, c.candidate_id): c for c in candidates}
    seeds = {c.variable: c for c in candidates if c.operation == "seed"}
    chosen = {c.variable: c for c in candidates if c.status == "best"}
    best = {}
    for c in candidates:  # ordered by reward: the first per variable is the best
        best.setdefault(c.variable, c)
    final = run.final_selection or {}
    contenders = {
        (variable, cid) for variable, entry in final.items() for cid in entry.get("contenders", [])
    }
    rows = []
    for c in candidates:
        rewards = list(c.example_rewards or [])
        row = Row(candidate=c, reward=float(c.reward), n=len(rewards))
        bounds = interval(rewards)
        if bounds is not None:
            row.low, row.high = bounds
        parent = by_key.get((c.variable, (c.parent_ids or [None])[0]))
        if parent is not None and parent is not c:
            row.vs_parent = verdict(list(parent.example_rewards or []), rewards)
        seed = seeds.get(c.variable)
        if seed is not None and seed is not c:
            row.vs_seed = verdict(list(seed.example_rewards or []), rewards)
        top = best.get(c.variable)
        if top is not None and top is not c:
            row.vs_best = verdict(list(top.example_rewards or []), rewards)
        row.selection_reward = c.selection_reward
        row.contender = (c.variable, c.candidate_id) in contenders
        seed_reward = None if seed is None else seed.reward
        won = c is chosen.get(c.variable) or (
            seed_reward is not None and c.reward > seed_reward and c is not seed
        )
        row.win_within_noise = bool(won and row.vs_seed is not None and row.vs_seed.within_noise)
        rows.append(row)
    costed = [r for r in rows if r.prompt_tokens is not None]
    for row, flag in zip(
        costed, non_dominated([(r.prompt_tokens, r.reward) for r in costed]), strict=True
    ):
        row.pareto = flag
    for row in costed:
        top = best.get(row.candidate.variable)
        row.cheaper_within_noise = bool(
            top is not None
            and top is not row.candidate
            and top.prompt_tokens_per_call is not None
            and row.prompt_tokens < top.prompt_tokens_per_call
            and row.vs_best is not None
            and row.vs_best.within_noise
        )
    return {
        "rows": rows,
        "points": [_point(r) for r in rows],
        "final": final,
        "top_k": final_selection.TOP_K,
        "split": run.best_reward_split,
        "pareto_count": sum(r.pareto for r in rows),
        "costed_count": len(costed),
        "paired_count": sum(r.n > 0 for r in rows),
        "has_selection": any(r.selection_reward is not None for r in rows),
        "resamples": RESAMPLES,
    }


def _point(row: Row) -> dict[str, Any]:
    c = row.candidate
    return {
        "id": c.candidate_id,
        "pk": c.pk,
        "variable": c.variable,
        "operation": c.operation,
        "status": c.status,
        "reward": row.reward,
        "low": row.low,
        "high": row.high,
        "selection": row.selection_reward,
        "tokens": row.prompt_tokens,
        "latency": row.latency,
        "pareto": row.pareto,
        "chosen": c.status == "best",
        "cheaper": row.cheaper_within_noise,
    }
