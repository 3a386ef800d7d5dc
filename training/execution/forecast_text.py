"""How a forecast reads: its one line on the launch form and its rows against the actual on
the run page (calls, tokens, cost, time), each figure in the unit that reads best.
"""

from __future__ import annotations

from typing import Any

#: What a forecast says for the time while no run of its model has been measured: its Time
#: row (the form's and the run page's alike) and its summary.
NO_TIME_CELL = "known after a first run on this model"
NO_TIME_TEXT = f"time {NO_TIME_CELL}"


def tokens_text(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f} M tokens"
    if value >= 1_000:
        return f"{value / 1_000:.0f} k tokens"
    return f"{value:.0f} tokens"


def cost_text(cost: dict[str, float] | None, local: bool) -> str:
    if cost is None:
        return "cost unknown"
    text = f"${cost['expected']:.2f}"
    return f"{text} (local)" if local else text


def seconds_text(low: float, high: float) -> str:
    """A duration range in the unit that reads best: "40–70 s", "6–9 min", "1.5–2.0 h"."""
    if high < 90:
        return f"{low:.0f}–{max(high, low + 1):.0f} s"
    if high < 90 * 60:
        low_m, high_m = int(low // 60), int(-(-high // 60))
        return f"{low_m}–{max(high_m, low_m + 1)} min"
    return f"{low / 3600:.1f}–{high / 3600:.1f} h"


def duration_text(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def summary(result: dict[str, Any]) -> str:
    """ "about 420 calls, 190 k tokens, $0.00 (local), 6–9 min"; without a measured run of the
    model, "..., time known after a first run on this model"."""
    calls = result["calls"]
    parts = [f"about {calls['expected']} calls"]
    if result.get("tokens"):
        parts.append(f"{tokens_text(result['tokens']['expected'])}")
        parts.append(cost_text(result.get("cost"), result["local"]))
    if result.get("seconds"):
        parts.append(seconds_text(result["seconds"]["low"], result["seconds"]["high"]))
    elif result.get("tokens"):
        parts.append(NO_TIME_TEXT)
    untimed = (result.get("machine") or {}).get("untimed")
    if untimed:
        parts.append(f"starting when a worker is free ({untimed_text(untimed)})")
    elif result.get("wait"):
        parts.append(f"starting in about {duration_text(result['wait'])}")
    return ", ".join(parts)


def untimed_text(count: int) -> str:
    """The runs ahead whose time is not known: "2 runs ahead have no time yet"."""
    return f"{count} run{'s' if count != 1 else ''} ahead {'has' if count == 1 else 'have'} no time yet"


def comparison(run: Any) -> list[dict[str, Any]]:
    """The run page's rows: forecast against actual (calls, tokens, cost, time)."""
    stored = run.forecast or {}
    if not stored:
        return []
    usage = run.usage or {}
    seconds = float(run.active_seconds or 0.0)
    if not seconds and run.duration is not None:
        seconds = run.duration.total_seconds()
    finished = run.status == run.SUCCEEDED  # a stopped or failed run did not do it all
    rows = []

    def row(label: str, forecast_text: str, actual_text: str, expected, actual) -> None:
        error = None
        if finished and expected and actual is not None:
            error = round(100.0 * (actual - expected) / expected)
        rows.append(
            {"label": label, "forecast": forecast_text, "actual": actual_text, "error": error}
        )

    calls = stored["calls"]
    calls_text = str(calls["expected"])  # as the launch form shows it
    if calls["low"] != calls["high"]:
        calls_text = f"about {calls['expected']} ({calls['low']}–{calls['high']})"
    row("LM calls", calls_text, str(run.lm_calls), calls["expected"], run.lm_calls)
    if stored.get("tokens"):
        tokens = int(usage.get("total_tokens") or 0)
        row(
            "Tokens",
            tokens_text(stored["tokens"]["expected"]),
            tokens_text(tokens),
            stored["tokens"]["expected"],
            tokens,
        )
        cost = usage.get("cost")
        row(
            "Cost",
            cost_text(stored["cost"], stored.get("local", False)),
            "unknown" if cost is None and run.lm_calls else f"${float(cost or 0):.2f}",
            None,
            None,
        )
    span = stored.get("seconds")
    if span:
        row(
            "Time",
            seconds_text(span["low"], span["high"]),
            duration_text(seconds),
            span["expected"],
            seconds,
        )
    elif stored.get("tokens"):
        row("Time", NO_TIME_CELL, duration_text(seconds), None, None)
    return rows


def assumed(now: dict[str, Any]) -> list[str]:
    """What a forecast's start assumes of the queue, in words."""
    if now.get("untimed"):
        return [f"starts when a worker is free: {untimed_text(now['untimed'])}"]
    if not now["wait"]:
        return []
    return [
        f"starts after about {duration_text(now['wait'])} "
        f"({now['running']} running, {now['queued']} queued, {now['workers']} worker processes)"
    ]
