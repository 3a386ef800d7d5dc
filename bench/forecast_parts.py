"""Where a bench run's time went, by kind of call, for ``bench/forecast_accuracy.py``.

While a run executes, every local completion (``smollm2.complete``) is timed with the role
its trace context names (prediction, judge, mutation, crossover) and the llama.cpp figures it
reports (prompt tokens sent and evaluated, generated tokens, decode steps, milliseconds
evaluating the prompt and generating). From the calls' intervals: the wall time with at least
one call of a role in flight, and the wall time with none (the run's work besides LM calls:
overheads, embeddings, writes).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

KEYS = (
    "prompt_tokens",
    "prompt_tokens_evaluated",
    "completion_tokens",
    "forced_tokens",
    "generation_evals",
    "prompt_ms",
    "generation_ms",
)


class Parts:
    """Install with :meth:`start`, read with :meth:`stop` (one run at a time)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: list[tuple[str, float, float, dict[str, int]]] = []
        self.started = 0.0
        self._original = None

    def start(self) -> None:
        from trainboard_local import smollm2
        from training.engine.language_models import tracing

        self.rows = []
        self.started = time.perf_counter()
        original = smollm2.complete
        self._original = original

        def complete(messages, **kwargs):
            role = (tracing._CONTEXT.get() or {}).get("role") or "?"
            began = time.perf_counter()
            result = original(messages, **kwargs)
            ended = time.perf_counter()
            timings = result.get("timings") or {}
            usage = {
                **(result.get("usage") or {}),
                "prompt_ms": round(1000 * timings.get("prompt_seconds", 0.0)),
                "generation_ms": round(1000 * timings.get("generation_seconds", 0.0)),
            }
            with self.lock:
                self.rows.append((role, began, ended, {k: int(usage.get(k, 0)) for k in KEYS}))
            return result

        smollm2.complete = complete

    def stop(self) -> dict[str, Any]:
        from trainboard_local import smollm2

        ended = time.perf_counter()
        smollm2.complete = self._original
        by_role: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for role, began, end, usage in self.rows:
            row = by_role[role]
            row["calls"] += 1
            row["latency"] += end - began
            for key, value in usage.items():
                row[key] += value
            spans[role].append((began, end))
        every = [span for role_spans in spans.values() for span in role_spans]
        for role, role_spans in spans.items():
            by_role[role]["wall"] = _union(role_spans)
        return {
            "wall": ended - self.started,
            "lm_wall": _union(every),
            "roles": {role: dict(row) for role, row in by_role.items()},
        }


def _union(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for began, ended in sorted(spans):
        if ended <= reach:
            continue
        total += ended - max(began, reach)
        reach = ended
    return total


def lines(parts: dict[str, Any], forecast: dict[str, Any]) -> list[str]:
    """The run's time by kind of call, measured, and the sizes the forecast assumed."""
    sizes = forecast.get("sizes") or {}
    out = [
        f"LM calls in flight {parts['lm_wall']:.1f} s of {parts['wall']:.1f} s; "
        f"none in flight {parts['wall'] - parts['lm_wall']:.1f} s (overheads, embeddings, "
        "writes)"
    ]
    for role, row in sorted(parts["roles"].items()):
        calls = max(1.0, row["calls"])
        size = (
            sizes.get(
                "judge"
                if role == "judge"
                else "mutation"
                if role in ("mutation", "crossover")
                else "prediction"
            )
            or {}
        )
        out.append(
            f"{role}: {row['calls']:.0f} calls in flight {row['wall']:.1f} s; per call "
            f"{row['prompt_tokens'] / calls:.0f} prompt tokens sent "
            f"(forecast {size.get('prompt', 0):.0f}), {row['prompt_tokens_evaluated'] / calls:.0f} "
            f"evaluated (forecast {size.get('fresh') or size.get('prompt', 0):.0f}), "
            f"{row['completion_tokens'] / calls:.0f} generated (forecast "
            f"{size.get('completion', 0):.0f}; {row['forced_tokens'] / calls:.0f} forced, "
            f"{row['generation_evals'] / calls:.0f} decode steps); llama.cpp "
            f"{row['prompt_ms'] / calls:.0f} ms prompt + {row['generation_ms'] / calls:.0f} ms "
            f"generating, latency {1000 * row['latency'] / calls:.0f} ms"
        )
    return out
