"""The measured forecast's figures where the workers run: what each finished run observed per
call (kept in its model's ``ModelPace.sizes``), the others' demand on the cores now, and the
forecast of a configuration from them (``training.forecasting.measured``).

:func:`record` is called by :func:`~training.execution.pace.learning.learn_from_run` for every
run that did its work; :func:`apply` gives a forecast (its calls as counted) its tokens and
time from those observations (``training.execution.forecast`` calls it).
"""

from __future__ import annotations

import time
from typing import Any

from django.db.models import Count, Sum

from training.execution import forecast_text
from training.execution.pace import cpu_meter
from training.forecasting.forecast import Span
from training.forecasting.measured import KEPT, Observation, estimate, observe
from training.forecasting.pace import CallSize, Pace
from training.models import LMCallTrace, ModelPace

#: Where a model's observations are kept in ``ModelPace.sizes``.
OBSERVED_KEY = "observed"
#: The roles of the traces, as the forecast counts them (crossovers are mutations).
ROLE_OF = {
    "prediction": "prediction",
    "judge": "judge",
    "mutation": "mutation",
    "crossover": "mutation",
}
#: How long the others' demand is sampled for a forecast (seconds of the request).
SAMPLE_SECONDS = 0.2


def others_now() -> float:
    """Cores' worth of CPU the other processes take now (a short sample; 0.0 when unknown)."""
    start = cpu_meter.sample()
    time.sleep(SAMPLE_SECONDS)
    end = cpu_meter.sample()
    if start is None or end is None or end.at <= start.at:
        return 0.0
    others = (end.busy - start.busy) - (end.own - start.own)
    return min(float(cpu_meter.cores()), max(0.0, others / (end.at - start.at)))


def _threads(stored: dict[str, Any]) -> dict[str, float]:
    cores = cpu_meter.cores()
    parallel = float((stored.get("pace") or {}).get("parallel") or 1.0)
    batch = float(stored.get("batch_size") or 1)
    wide = max(1.0, min(batch, parallel, float(cores)))
    return {"prediction": wide, "judge": wide, "mutation": 1.0}


def observations(model: str) -> list[Observation]:
    row = ModelPace.objects.filter(model=model).values("sizes").first()
    kept = ((row or {}).get("sizes") or {}).get(OBSERVED_KEY) or []
    return [Observation.from_dict(item) for item in kept if isinstance(item, dict)]


def record(run: Any, sizes: dict[str, Any], during: float | None) -> None:
    """Add run ``run``'s observation to ``sizes`` (its model's, written by the caller):
    ``during``: the cores the other processes got while it ran (None: unknown)."""
    stored = run.forecast or {}
    rows = (
        LMCallTrace.objects.filter(
            run_id=run.pk, kind="completion", memo_hit=False, cache_hit=False, failed=False
        )
        .values("role")
        .annotate(
            calls=Count("id"),
            latency=Sum("latency"),
            prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"),
        )
    )
    roles: dict[str, dict[str, float]] = {}
    for row in rows:
        role = ROLE_OF.get(row["role"])
        if role is None:
            continue
        into = roles.setdefault(role, {"calls": 0.0, "latency": 0.0, "tokens": 0.0})
        into["calls"] += row["calls"]
        into["latency"] += float(row["latency"] or 0.0)
        into["tokens"] += float(row["prompt"] or 0) + float(row["completion"] or 0)
    # The demand the others met the run with: what they got meanwhile (a share of the cores
    # under contention) or, when more, what they take now it has ended; a provider's calls
    # run elsewhere (this machine's load does not slow them).
    others = max(during or 0.0, others_now()) if stored.get("local") else 0.0
    found = observe(
        roles,
        float(run.active_seconds),
        others,
        _threads(stored),
        cpu_meter.cores(),
        owner=run.owner_id,
        program=run.program_id,
        optimizer=((run.config or {}).get("optimizer") or {}).get("name"),
        at=time.time(),
    )
    if found is None:
        return
    kept = [item for item in sizes.get(OBSERVED_KEY) or [] if isinstance(item, dict)]
    sizes[OBSERVED_KEY] = [*kept, found.to_dict()][-KEPT:]


def _span(part: dict[str, Any] | None) -> Span:
    part = part or {}
    return Span(
        float(part.get("low", 0)), float(part.get("expected", 0)), float(part.get("high", 0))
    )


def _fallback(counted: dict[str, Any], threads: dict[str, float]) -> dict[str, tuple[float, float]]:
    """Idle seconds and tokens per call of each role from the calibration's rule (a role no
    run has observed yet)."""
    from training.execution.pace import calibration

    pace, _ = calibration.current(counted["pace_key"])
    sizes = counted.get("sizes") or {}
    found: dict[str, tuple[float, float]] = {}
    for role in ("prediction", "judge", "mutation"):
        size = sizes.get(role) or {}
        call = CallSize(
            float(size.get("prompt") or 0), float(size.get("completion") or 0), size.get("fresh")
        )
        seconds = pace.call(call, long=role != "prediction") if isinstance(pace, Pace) else 0.0
        found[role] = (seconds / max(1.0, threads.get(role, 1.0)), call.total)
    return found


def apply(result: dict[str, Any], program_row: Any, config: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a ready forecast) with its tokens and time from the observations of recent
    runs of its model (:mod:`training.forecasting.measured`), its calls as counted."""
    parts = result["parts"]
    calls = {
        "prediction": _span(parts["predictions"]) + _span(parts["evaluations"]),
        "judge": _span(parts["judge"]),
        "mutation": _span(parts["optimizer"]),
    }
    threads = _threads(result)
    found = estimate(
        calls,
        observations(result["pace_key"]),
        others_now() if result.get("local") else 0.0,
        cpu_meter.cores(),
        threads,
        fallback=_fallback(result, threads),
        program=getattr(program_row, "pk", None),
        owner=getattr(program_row, "owner_id", None),
        optimizer=(config.get("optimizer") or {}).get("name"),
    )
    seconds = found.seconds
    result.update(
        tokens=found.tokens.rounded(),
        seconds={"low": seconds.low, "expected": seconds.expected, "high": seconds.high},
        measured={"observed": found.observed, "slowdown": found.slowdown},
        assumptions=found.notes,
    )
    result["seconds_expected_text"] = forecast_text.duration_text(seconds.expected)
    result["seconds_range_text"] = forecast_text.seconds_text(seconds.low, seconds.high)
    result["time_text"] = result["seconds_range_text"]
    return result
