"""Which points of a cost/quality set are non-dominated (the Pareto front).

Why: an optimizer that only reports its best reward hides the candidate that is nearly as
good for a fraction of the prompt. A point is dominated when another costs no more and scores
no less, and is strictly better on one of the two; the others are the front, the only
candidates worth choosing between on cost and quality.

Example:
    >>> non_dominated([(100, 0.8), (50, 0.8), (60, 0.5), (200, 0.9)])
    [False, True, False, True]
"""

from __future__ import annotations

from collections.abc import Sequence


def non_dominated(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For each ``(cost, quality)`` point, whether no other point dominates it (costs no more,
    scores no less, and is strictly better on one). Equal points do not dominate each other."""
    flags = []
    for index, (cost, quality) in enumerate(points):
        dominated = any(
            other_cost <= cost
            and other_quality >= quality
            and (other_cost < cost or other_quality > quality)
            for other, (other_cost, other_quality) in enumerate(points)
            if other != index
        )
        flags.append(not dominated)
    return flags
