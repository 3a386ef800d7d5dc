"""Runs laid out as a tree of branches (``Run.parent_run``) for the runs list and compare.

The list keeps its order (its sort) for runs whose parent is not in it; each run's
branches follow it, in that same order, one level deeper. Each run gets ``branch_depth``
(0 for a root) and ``branch_indent`` (the depth, capped at ``MAX_INDENT`` so a long chain
of branches stays on a phone's screen).

Example:

    runs = run_tree.as_tree(runs)     # [run 10 (0), run 12 (1), run 15 (2), run 11 (0)]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MAX_INDENT = 4


def as_tree(runs: Iterable[Any]) -> list[Any]:
    """``runs`` reordered so branches follow their parent, each with its depth set."""
    runs = list(runs)
    present = {run.pk for run in runs}
    children: dict[int, list[Any]] = {}
    roots = []
    for run in runs:
        parent = getattr(run, "parent_run_id", None)
        if parent in present and parent != run.pk:
            children.setdefault(parent, []).append(run)
        else:
            roots.append(run)
    ordered: list[Any] = []
    seen: set[int] = set()

    def visit(run: Any, depth: int) -> None:
        if run.pk in seen:  # never loops, even on inconsistent data
            return
        seen.add(run.pk)
        run.branch_depth = depth
        run.branch_indent = min(depth, MAX_INDENT)
        ordered.append(run)
        for child in children.get(run.pk, []):
            visit(child, depth + 1)

    for run in roots:
        visit(run, 0)
    for run in runs:  # a cycle's members (cannot happen through the UI): shown flat
        visit(run, 0)
    return ordered
