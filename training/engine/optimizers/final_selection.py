"""The final choice on a selection split held out from training and validation.

Why: an optimizer that scores dozens of candidates on the same small validation set and keeps
the best one keeps, partly, the one that got lucky on it (the winner's curse; users of GEPA
ask for exactly this held-out selection). With ``fit(selection_split=...)`` the top ``TOP_K``
candidates on validation (and the seed, always) are scored once more on rows no candidate was
chosen on, and the final program is the best of them there, by the same one rule as on
validation (``selection.champion``): the seed unless a contender beats it beyond noise on
the selection rows.

Pure functions over candidate dicts (``id``, ``operation``, ``reward``,
``selection_reward``); ``Optimizer.on_train_end`` does the scoring.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from training.engine.optimizers import selection as sel

#: How many of the best validation candidates are scored on the selection split (the seed
#: joins them when it is not among them). Defined once: the engine, the run page and the bench
#: read it from here.
TOP_K = 5


def contenders(candidates: Sequence[dict[str, Any]], top_k: int = TOP_K) -> list[dict[str, Any]]:
    """The ``top_k`` scored candidates with the highest validation reward (ties: earliest),
    plus the seed when it is not among them, in that order."""
    scored = [c for c in candidates if c.get("reward") is not None]
    ranked = sorted(enumerate(scored), key=lambda pair: (-float(pair[1]["reward"]), pair[0]))
    chosen = [c for _, c in ranked[: max(0, int(top_k))]]
    seed = next((c for c in scored if c.get("operation") == "seed"), None)
    if seed is not None and all(c is not seed for c in chosen):
        chosen.append(seed)
    return chosen


def choose(contenders_: Sequence[dict[str, Any]], margin: float) -> dict[str, Any] | None:
    """The contender with the best ``selection_reward`` under the champion rule (the seed
    unless one beats it by ``margin``; ties to the higher validation reward, the order of
    ``contenders_``). None when none has a selection reward."""
    scored = [c for c in contenders_ if c.get("selection_reward") is not None]
    if not scored:
        return None
    # each contender judged on its selection rows alone (its validation evidence left out)
    proxies = [
        {
            "id": c.get("id"),
            "operation": c.get("operation"),
            "reward": c["selection_reward"],
            "example_rewards": c.get("selection_example_rewards"),
            "_original": c,
        }
        for c in scored
    ]
    best = sel.champion(proxies, margin)
    return None if best is None else best["_original"]
