"""What the optimizer refused before scoring, as a run keeps it (``Run.refusals``).

Why: OMEGA refuses junk rewrites (empty, punctuation only, a stub, repetitions, invented
labels; ``training.engine.optimizers.candidate_checks``) and says so in a
``candidate_refused`` event. The run page lists them as "refused: why" rows under the
leaderboard, so a user sees that the optimizer's model wrote junk instead of wondering why
nothing was kept. A run can refuse hundreds of texts: it keeps a count per rule and only the
latest few texts of each, clipped — bounded whatever the events say.

Stored shape::

    {"count": 7, "rules": {"repeats": {"reason": "the text repeats itself", "count": 5,
                                       "latest": [{"text", "operation", "variable",
                                                   "field", "epoch"}, ...]}}}

Example:

    stored = add(run.refusals, event)   # a new dict; the run's row is updated with it
    rows(stored)                         # [{"rule", "reason", "count", "latest"}], most first
"""

from __future__ import annotations

from typing import Any

#: Texts kept per rule (the latest ones).
LATEST_PER_RULE = 3
#: Characters of a kept text (the engine's event carries at most 200 already).
TEXT_CHARS = 200
#: Characters of a rule, a reason, an operation, a field or a variable name.
NAME_CHARS = 200
#: Distinct rules kept (the engine has six; an unknown one beyond this is counted only).
MAX_RULES = 20


def _clip(value: Any, limit: int) -> str:
    return "" if value is None else str(value)[:limit]


def add(stored: dict[str, Any] | None, event: dict[str, Any]) -> dict[str, Any]:
    """``stored`` (a run's ``refusals``) with one ``candidate_refused`` event added."""
    result = {"count": int((stored or {}).get("count") or 0) + 1, "rules": {}}
    rules = {key: dict(value) for key, value in ((stored or {}).get("rules") or {}).items()}
    rule = _clip(event.get("rule") or "unknown", NAME_CHARS)
    if rule in rules or len(rules) < MAX_RULES:
        entry = rules.get(rule) or {"reason": "", "count": 0, "latest": []}
        entry["reason"] = _clip(event.get("reason") or entry["reason"], NAME_CHARS)
        entry["count"] = int(entry["count"]) + 1
        latest = {
            "text": _clip(event.get("text"), TEXT_CHARS),
            "operation": _clip(event.get("operation"), NAME_CHARS),
            "variable": _clip(event.get("variable"), NAME_CHARS),
            "field": _clip(event.get("field"), NAME_CHARS),
            "epoch": int(event.get("epoch") or 0),
        }
        entry["latest"] = [latest, *list(entry.get("latest") or [])][:LATEST_PER_RULE]
        rules[rule] = entry
    result["rules"] = rules
    return result


def rows(stored: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per rule, the most frequent first: ``rule``, ``reason``, ``count``, ``latest``."""
    rules = (stored or {}).get("rules") or {}
    found = [{"rule": rule, **entry} for rule, entry in rules.items()]
    return sorted(found, key=lambda row: (-int(row.get("count") or 0), row["rule"]))


def counts(stored: dict[str, Any] | None) -> dict[str, int]:
    """``{rule: count}``: how many rewrites each rule refused (the run advice counts them)."""
    return {row["rule"]: int(row.get("count") or 0) for row in rows(stored)}
