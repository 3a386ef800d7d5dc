"""The lineage of a run: which candidate came from which, from the seed to the best.

``layout`` is a pure function of the candidates (tested without a database): one node per
candidate id (a RandomFewShot candidate or the seed spans every variable under one id), each
placed on the row of its generation (1 + its deepest parent's) and ordered within the row by
where its parents sit, so children stay under their parents. Every edge carries the child's
operation (``few_shot``, ``mutation``, ``crossover``); the best path runs from the best
candidate back to a seed through its best-rewarded parent at each step. The page's script
(``static/training/lineage.js``) only draws it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.urls import reverse

from training.models import Run

#: Candidates a lineage shows at most (the oldest first: a tree grows from its seed).
MAX_NODES = 300


def _order_key(node: dict[str, Any]) -> tuple:
    """Creation order: epoch, then the number in the engine's ids (``c12`` after ``c9``)."""
    match = re.search(r"(\d+)$", str(node["id"]))
    return (node.get("epoch") or 0, int(match.group(1)) if match else 0, str(node["id"]))


def _best(nodes: dict[str, dict[str, Any]]) -> str | None:
    """The candidate marked ``best``; else the highest reward (the earliest on a tie)."""
    ordered = sorted(nodes.values(), key=_order_key)
    for node in ordered:
        if node["status"] == "best":
            return node["id"]
    scored = [n for n in ordered if n["reward"] is not None]
    if not scored:
        return None
    top = max(n["reward"] for n in scored)
    return next(n["id"] for n in scored if n["reward"] == top)


def layout(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """Tree layout of candidates.

    Args:
        candidates: dicts with ``id``, ``parent_ids``, ``operation``, ``reward``, ``epoch``,
            ``status`` and optionally ``pk`` (rows of several variables may share an id).

    Returns:
        ``{"nodes": [{id, pk, operation, reward, epoch, status, depth, x, best}],
        "edges": [{source, target, operation, best}], "depth", "widest", "best"}``;
        ``x`` is in (0, 1) across the node's row, ``depth`` its generation (0: seeds).
    """
    nodes: dict[str, dict[str, Any]] = {}
    for row in candidates:
        key = str(row["id"])
        node = nodes.get(key)
        if node is None:
            node = nodes[key] = {
                "id": key,
                "pk": row.get("pk"),
                "operation": row.get("operation") or "",
                "reward": row.get("reward"),
                "epoch": int(row.get("epoch") or 0),
                "status": row.get("status") or "",
                "parents": [],
            }
        elif row.get("status") == "best":
            node["status"] = "best"
        for parent in row.get("parent_ids") or []:
            if str(parent) not in node["parents"] and str(parent) != key:
                node["parents"].append(str(parent))
    ordered = sorted(nodes.values(), key=_order_key)
    depth: dict[str, int] = {}
    for node in ordered:  # parents are always made before their children
        node["parents"] = [p for p in node["parents"] if p in nodes]
        depth[node["id"]] = 1 + max((depth.get(p, 0) for p in node["parents"]), default=-1)
    rows: dict[int, list[dict[str, Any]]] = {}
    for node in ordered:
        node["depth"] = depth[node["id"]]
        rows.setdefault(node["depth"], []).append(node)
    position: dict[str, float] = {}
    for level in sorted(rows):
        members = rows[level]
        members.sort(
            key=lambda n: (
                sum(position.get(p, 0.5) for p in n["parents"]) / max(len(n["parents"]), 1),
                _order_key(n),
            )
        )
        for index, node in enumerate(members):
            node["x"] = round((index + 0.5) / len(members), 6)
            position[node["id"]] = node["x"]
    best = _best(nodes)
    path: list[str] = []
    current = best
    while current is not None and current not in path:
        path.append(current)
        parents = [nodes[p] for p in nodes[current]["parents"]]
        scored = sorted(
            parents, key=lambda n: (-(n["reward"] if n["reward"] is not None else -1.0),)
        )
        current = scored[0]["id"] if scored else None
    on_path = set(path)
    path_edges = set(zip(path[1:], path[:-1], strict=False))  # (parent, child)
    edges = [
        {
            "source": parent,
            "target": node["id"],
            "operation": node["operation"],
            "best": (parent, node["id"]) in path_edges,
        }
        for node in ordered
        for parent in node["parents"]
    ]
    for node in ordered:
        node["best"] = node["id"] in on_path
    return {
        "nodes": ordered,
        "edges": edges,
        "depth": max(depth.values(), default=-1) + 1,
        "widest": max((len(r) for r in rows.values()), default=0),
        "best": best,
        "best_path": list(reversed(path)),
    }


def run_lineage(run: Run) -> dict[str, Any]:
    """The lineage fragment's data for a run (its oldest ``MAX_NODES`` candidates)."""
    rows = list(
        run.candidates.order_by("epoch", "id").values(
            "pk", "candidate_id", "parent_ids", "operation", "reward", "epoch", "status"
        )[: MAX_NODES * 4]  # several variables share one id
    )
    data = layout([{**row, "id": row["candidate_id"]} for row in rows])
    data["nodes"] = data["nodes"][:MAX_NODES]
    kept = {n["id"] for n in data["nodes"]}
    data["edges"] = [e for e in data["edges"] if e["source"] in kept and e["target"] in kept]
    for node in data["nodes"]:
        if node["pk"] is not None:
            node["url"] = reverse("training:candidate-detail", args=[run.pk, node["pk"]])
    return {"lineage": data, "lineage_json": json.dumps(data)}
