"""Where a run's spend goes: calls, tokens, cost and call time by role, and against a cap.

The engine's usage totals split every call by the role ``tracing.trace_context`` gave it
(``usage.by_role``: task predictions, the optimizer's mutations and crossovers, judges,
embeddings), whether or not traces are recorded; the worker stores them on the run with the
rest of its usage (``PersistenceCallback.usage_fields``). ``breakdown`` is a pure function of
that dict and the run's configuration (tested without a database).

Caps: a run whose configuration holds ``budget_calls``, ``budget_cost`` (dollars) or
``budget_minutes`` shows how much of each it has used; these keys are read here only, the
launch form and the worker own them. Without them, no cap is shown.
"""

from __future__ import annotations

import numbers
from typing import Any

from training.engine.language_models.tracing import ROLES
from training.models import Run

ROLE_LABELS = {
    "prediction": "Task predictions",
    "mutation": "Optimizer: mutations",
    "crossover": "Optimizer: crossovers",
    "judge": "Judges (rewards)",
    "embedding": "Embeddings",
}
#: Run configuration keys of the caps, and how each is measured.
CAPS = (
    ("budget_calls", "calls", "LM calls"),
    ("budget_cost", "cost", "cost ($)"),
    ("budget_minutes", "minutes", "minutes"),
)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else 0.0


def breakdown(
    usage: dict[str, Any] | None, config: dict[str, Any] | None, elapsed_seconds: float | None
) -> dict[str, Any]:
    """The spend table of a run.

    Args:
        usage: the run's stored usage (``Usage.to_dict()`` merged over attempts).
        config: the run's configuration (only the cap keys are read).
        elapsed_seconds: the run's wall time so far (None before it starts).

    Returns:
        ``{"rows": [{role, label, calls, tokens, cost, seconds, calls_share, seconds_share}],
        "total": {calls, tokens, cost, seconds}, "caps": [{key, label, used, cap, percent}],
        "cost_known"}``; roles in the engine's order, only those that made a call or a hit.
    """
    usage = usage or {}
    by_role = usage.get("by_role") or {}
    order = [*ROLES, *sorted(set(by_role) - set(ROLES))]
    rows = []
    for role in order:
        values = by_role.get(role)
        if not values:
            continue
        calls = int(_number(values.get("calls")))
        hits = int(_number(values.get("memo_hits")) + _number(values.get("cache_hits")))
        if not calls and not hits:
            continue
        rows.append(
            {
                "role": role,
                "label": ROLE_LABELS.get(role, role),
                "calls": calls,
                "hits": hits,
                "tokens": int(
                    _number(values.get("prompt_tokens")) + _number(values.get("completion_tokens"))
                ),
                "cost": _number(values.get("cost")),
                "seconds": _number(values.get("latency")),
                "failures": int(_number(values.get("failures"))),
            }
        )
    total = {
        key: sum(row[key] for row in rows) for key in ("calls", "hits", "tokens", "cost", "seconds")
    }
    for row in rows:
        row["calls_share"] = round(100 * row["calls"] / total["calls"], 1) if total["calls"] else 0
        row["seconds_share"] = (
            round(100 * row["seconds"] / total["seconds"], 1) if total["seconds"] else 0
        )
    used = {
        "calls": _number(usage.get("calls")),
        "cost": _number(usage.get("cost")),
        "minutes": (elapsed_seconds or 0.0) / 60,
    }
    caps = []
    for key, measure, label in CAPS:
        cap = _number((config or {}).get(key))
        if cap <= 0:
            continue
        caps.append(
            {
                "key": key,
                "label": label,
                "used": used[measure],
                "cap": cap,
                "percent": round(min(100 * used[measure] / cap, 999), 1),
            }
        )
    return {
        "rows": rows,
        "total": total,
        "caps": caps,
        "cost_known": not (usage.get("cost") is None and usage.get("calls")),
    }


def run_spend(run: Run) -> dict[str, Any]:
    """The spend fragment's context of a run."""
    duration = run.duration
    return {
        "spend": breakdown(run.usage, run.config, duration.total_seconds() if duration else None)
    }
