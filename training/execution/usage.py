"""Usage totals of a run, summed across its attempts (a resumed run keeps counting)."""

from __future__ import annotations

import dataclasses
from typing import Any

from training.engine.language_models.usage import Usage

# Every numeric counter of the engine's Usage (so a new one is summed too), plus total_tokens.
SUMMED = (
    *(
        f.name
        for f in dataclasses.fields(Usage)
        if f.type in ("int", "float", int, float) and f.name != "cost"
    ),
    "total_tokens",
)


def merged_usage(base: dict[str, Any] | None, current: dict[str, Any] | None) -> dict[str, Any]:
    """``base + current`` for the counters; cost is None (unknown) if either part is unknown."""
    base, current = base or {}, current or {}
    merged: dict[str, Any] = {}
    for key in SUMMED:
        merged[key] = (base.get(key) or 0) + (current.get(key) or 0)
    costs = [part.get("cost") for part in (base, current) if part]
    if any(part and part.get("cost") is None and part.get("calls") for part in (base, current)):
        merged["cost"] = None
    else:
        merged["cost"] = sum(cost or 0.0 for cost in costs)
    merged["by_model"] = _merged_breakdown(base, current, "by_model")
    merged["by_role"] = _merged_breakdown(base, current, "by_role")
    return merged


def _merged_breakdown(base: dict, current: dict, key: str) -> dict[str, dict[str, Any]]:
    """``by_model`` / ``by_role``: each entry's numeric counters summed over both parts."""
    total: dict[str, dict[str, Any]] = {}
    for part in (base, current):
        for name, values in (part.get(key) or {}).items():
            entry = total.setdefault(name, {})
            for counter, value in values.items():
                if isinstance(value, int | float):
                    entry[counter] = entry.get(counter, 0) + value
    return total
