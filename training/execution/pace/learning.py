"""What every run a worker ends teaches its model's stored pace (``ModelPace``), which the
next forecast on that model reads (:mod:`training.execution.pace.calibration` measures the
first one).

:func:`learn_from_run`, called after a run's last write, teaches the stored pace what that run
took against what the pace said for its own calls (``Pace.time_factor``: the machine's load,
what the rule leaves out; an optimizer's calls, whose wall time is their traced latency,
teach ``Pace.optimizer_time_factor`` apart; each a shrunk median of recent runs, so one run
at a high load moves it little; each run's ratio is taken against the rule at the contention
its attempt measured, so the factor learns what the rule leaves out, not the load a run
happened to meet) and the characters per token of its prompts, and stores the tokens per
call its traces show for an LM judge's calls and OMEGA's mutations (``sizes``) in the pace of
the model that made them (the forecast's ``pace_keys``: a judge on another model than the
program's is sized there).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db.models import Avg, Count, Sum

from training.execution import run_config
from training.execution.pace import cpu_meter
from training.execution.pace import measured as observed_calls
from training.execution.pace.calibration import (
    JUDGE_DATA_PREFIX,
    judge_data_key,
    own_local_threads,
)
from training.execution.pace.cpu_meter import CpuSample
from training.forecasting.contention import ALONE_THREADS, Contention, batch_threads
from training.forecasting.forecast import Span
from training.forecasting.pace import MESSAGE_TOKENS, CallSize, Pace, overhead_seconds
from training.models import LMCallTrace, ModelPace, Run

logger = logging.getLogger(__name__)

#: Roles whose tokens per call are learned from traces (crossovers count as mutations).
LEARNED_ROLES = {"judge": ("judge",), "mutation": ("mutation", "crossover")}
#: An optimizer's calls: timed one at a time, by their own factor (``Pace.optimizer_time_factor``).
OPTIMIZER_ROLES = LEARNED_ROLES["mutation"]
#: Weight of the newest run in the learned sizes (an exponential moving average).
SIZE_WEIGHT = 0.5
#: A run's measured contention is kept for the next forecasts when it ran this long (seconds):
#: over a few seconds it says what the other processes did in a moment (a capped run of 8 s
#: measured half the load the next minutes had).
CONTENTION_MIN_SECONDS = 20.0
#: Prediction traces of a run read for its characters per token.
TRACES_READ = 50
#: An LM judge's tokens per call are also kept by the program and the data it judged
#: (:func:`judge_data_key`), for this many of them a model (the oldest dropped). Why: a
#: judge's critique follows the labels it compares; the calibration's four samples average
#: 76 answer tokens where the demo's judge writes 152, and one program's judge says little
#: of another's.
JUDGE_DATA_KEPT = 20
#: The key, in ``ModelPace.sizes``, of those keys oldest first (the order they are dropped
#: in). Why a list: PostgreSQL's jsonb keeps an object's keys in its own order (shorter
#: first), not the order they were written in.
JUDGE_DATA_ORDER = "judge_data_order"


def learn_from_run(
    run_id: int, cpu: tuple[CpuSample | None, CpuSample | None] | None = None
) -> None:
    """Teach the program model's pace what run ``run_id`` took (see the module docstring).

    Only a run that did its work (succeeded, or stopped at a cap) with a forecast stored at
    launch teaches; never raises (a run's end must not fail on it). ``cpu``: the
    ``cpu_meter`` samples at the start and the end of its last attempt (the contention it
    ran under; None: unknown, the rule is taken at the share the forecast assumed)."""
    try:
        _learn(run_id, cpu)
    except Exception:
        logger.exception("run %s: the pace was not updated", run_id)


def _learn(run_id: int, cpu: tuple[CpuSample | None, CpuSample | None] | None = None) -> None:
    run = (
        Run.objects.filter(pk=run_id)
        .only(
            "status", "forecast", "active_seconds", "config", "program_id", "dataset_id", "owner_id"
        )
        .first()
    )
    if run is None or run.status not in (Run.SUCCEEDED, Run.STOPPED):
        return
    stored = run.forecast or {}
    model = stored.get("pace_key") or stored.get("model")
    if not model or run.active_seconds <= 0:
        return
    traces = LMCallTrace.objects.filter(
        run_id=run_id, kind="completion", memo_hit=False, cache_hit=False, failed=False
    )
    by_role = {
        row["role"]: row
        for row in traces.values("role").annotate(
            calls=Count("id"), prompt=Avg("prompt_tokens"), completion=Avg("completion_tokens")
        )
    }
    # Each role's tokens per call go to the pace of the model that makes its calls (an LM
    # judge's on the reward's model: what the forecast reads them from).
    rows: dict[str, tuple[ModelPace, dict[str, Any]]] = {}

    def sizes_of(key: str) -> dict[str, Any]:
        if key not in rows:
            found, _ = ModelPace.objects.get_or_create(model=key)
            rows[key] = (found, dict(found.sizes or {}))
        return rows[key][1]

    during = cpu_meter.others_cores(cpu[0], cpu[1]) if cpu else None
    observed_calls.record(run, sizes_of(model), during)
    for role, names in LEARNED_ROLES.items():
        seen = traces.filter(role__in=names).aggregate(
            calls=Count("id"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens")
        )
        if seen["calls"]:
            prompt, completion = seen["prompt"] / seen["calls"], seen["completion"] / seen["calls"]
            sizes = sizes_of(_role_key(role, stored, run.config or {}, model))
            sizes[role] = _blend(sizes.get(role), prompt, completion)
            if role == "judge":  # and by the data it judged
                key = judge_data_key(run.program_id, run.dataset_id)
                sizes[key] = _blend(sizes.get(key), prompt, completion)
                _keep_newest_judge_data(sizes, key)
    for key, (found, sizes) in rows.items():
        if key != model:
            ModelPace.objects.filter(pk=found.pk).update(sizes=sizes)
    row, sizes = rows[model]
    changes = {"sizes": sizes}
    if row.pace and by_role:
        pace = Pace.from_dict(row.pace)
        chars_per_token = _chars_per_token(traces.filter(role="prediction"))
        if chars_per_token:
            pace = Pace.from_dict({**pace.to_dict(), "chars_per_token": chars_per_token})
        parts = stored.get("parts") or {}
        candidates = float((parts.get("candidates") or {}).get("expected") or 0)
        batches = int(parts.get("steps") or 0) * int(parts.get("epochs") or 0)
        overhead = overhead_seconds(Span.exact(candidates), batches).expected
        measured = _measured(pace, stored, cpu)
        share = 1.0 if measured else None  # the meter saw the other runs too
        batched, optimizer = _call_seconds(pace, by_role, stored, share)
        # what the run's work takes on an idle machine: its CPU time over that is the CPU
        # it wanted (``cpu_meter.contention_between``)
        idle = (batched + overhead) * pace.time_factor + optimizer * pace.optimizer_time_factor
        contention = _run_contention(pace, stored, cpu, run_id, idle) if measured else None
        if contention is not None:
            batch = float(stored.get("batch_size") or 1)
            wide = contention.slowdown(batch_threads(batch, pace.parallel, contention.cores))
            alone = contention.slowdown(ALONE_THREADS)
            batched, optimizer, overhead = batched * wide, optimizer * alone, overhead * alone
        # An optimizer's calls run one at a time: their wall time is their own latency.
        optimizer_traces = traces.filter(role__in=OPTIMIZER_ROLES)
        optimizer_actual = float(optimizer_traces.aggregate(s=Sum("latency"))["s"] or 0.0)
        same_model = not optimizer_traces.exclude(model=model).exists()
        learned = pace.learned(
            run.active_seconds - optimizer_actual,
            batched + overhead,
            optimizer_actual if same_model else None,
            optimizer if same_model else None,
        ).to_dict()
        if contention is not None and run.active_seconds >= CONTENTION_MIN_SECONDS:
            learned.update(contention=round(contention.others, 2), contention_at=time.time())
        changes["pace"] = learned
    ModelPace.objects.filter(pk=row.pk).update(**changes)


def _role_key(role: str, stored: dict[str, Any], config: dict[str, Any], model: str) -> str:
    """The pace key of the model that made ``role``'s calls in a run (its forecast's
    ``pace_keys``; a run launched before they were stored: the model its configuration
    names, ``model`` when that is the program's)."""
    key = (stored.get("pace_keys") or {}).get(role)
    if key:
        return str(key)
    named = (
        run_config.judge_model(config) if role == "judge" else run_config.optimizer_model(config)
    )
    return model if not named or named == stored.get("model") else named


def _keep_newest_judge_data(sizes: dict[str, Any], newest: str) -> None:
    """Keep the last :data:`JUDGE_DATA_KEPT` judge sizes by program and data in ``sizes``
    (``newest`` just written), oldest first in :data:`JUDGE_DATA_ORDER`; keys stored before
    that list count as the oldest."""
    listed = [k for k in sizes.get(JUDGE_DATA_ORDER) or [] if k in sizes and k != newest]
    earlier = sorted(
        k for k in sizes if k.startswith(JUDGE_DATA_PREFIX) and k not in listed and k != newest
    )
    order = [*earlier, *listed, newest]
    for old in order[:-JUDGE_DATA_KEPT]:
        del sizes[old]
    sizes[JUDGE_DATA_ORDER] = order[-JUDGE_DATA_KEPT:]


def _measured(
    pace: Pace, stored: dict[str, Any], cpu: tuple[CpuSample | None, CpuSample | None] | None
) -> bool:
    """The run's attempt was metered on a local model whose pace is kept for an idle machine."""
    return cpu is not None and pace.idle and bool(stored.get("local"))


def _run_contention(
    pace: Pace,
    stored: dict[str, Any],
    cpu: tuple[CpuSample | None, CpuSample | None] | None,
    run_id: int | None = None,
    idle_seconds: float | None = None,
) -> Contention | None:
    """The others' demand during a run's attempt on a local model (None: not measured, a
    provider's model, or a pace not kept for an idle machine). The fair share is inverted
    with what the run got (its CPU time) and what it wanted: its CPU time over
    ``idle_seconds`` (the rule's time for its calls on an idle machine), at most its forecast
    parts' busy threads (batched calls on ``batch_threads``, the rest on one, weighted by
    their seconds)."""
    if cpu is None or not _measured(pace, stored, cpu):
        return None
    parts = stored.get("seconds_parts") or {}
    cores = float(cpu_meter.cores())
    wide = batch_threads(float(stored.get("batch_size") or 1), pace.parallel, int(cores))
    batched = float(parts.get("batched") or 0.0)
    rest = float(parts.get("optimizer") or 0.0) + float(parts.get("overhead") or 0.0)
    threads = (batched * wide + rest * ALONE_THREADS) / (batched + rest) if batched + rest else 1
    measured = cpu_meter.contention_between(cpu[0], cpu[1], threads, idle_seconds)
    if measured is None:
        return None
    # The meter counts this application's other local runs among the other processes; the
    # forecast counts them in its share of the cores already (``pace.machine``).
    own = own_local_threads(pace.parallel, exclude=run_id)
    return Contention(max(0.0, measured.others - own), measured.cores)


def _chars_per_token(traces: Any) -> float | None:
    """Characters of prompt text per token in a run's prediction calls (what the forecast
    sizes a program's prompts by), the chat template's tokens of each message left out."""
    chars = tokens = 0.0
    for messages, prompt in traces.values_list("messages", "prompt_tokens")[:TRACES_READ]:
        if not isinstance(messages, list) or not prompt:
            continue
        chars += sum(len(str(m.get("content") or "")) for m in messages if isinstance(m, dict))
        tokens += prompt - MESSAGE_TOKENS * len(messages)
    return chars / tokens if chars and tokens > 0 else None


def _blend(old: Any, prompt: float, completion: float) -> dict[str, float]:
    if not isinstance(old, dict):
        return {"prompt": prompt, "completion": completion}
    keep = 1 - SIZE_WEIGHT
    return {
        "prompt": keep * float(old.get("prompt", prompt)) + SIZE_WEIGHT * prompt,
        "completion": keep * float(old.get("completion", completion)) + SIZE_WEIGHT * completion,
    }


def _call_seconds(
    pace: Pace, by_role: dict[str, dict], stored: dict[str, Any], share: float | None = None
) -> tuple[float, float]:
    """What the pace (its time factors left out) says the run's own calls took, at ``share``
    (None: the share the run had at launch): (the batched calls', the optimizer's); its
    overheads are added by the caller."""
    share = float(stored.get("share") or 1.0) if share is None else share
    batch = float(stored.get("batch_size") or 1)
    width = max(1.0, min(batch, pace.parallel * share))
    alone_share = min(1.0, pace.parallel * share)
    # A prediction evaluates only its fresh part (the prefix shared with the calls before it
    # stays evaluated): the share the forecast assumed, as the forecast computed the time.
    seed = (stored.get("sizes") or {}).get("prediction") or {}
    fresh_share = None
    if seed.get("fresh") is not None and seed.get("prompt"):
        fresh_share = float(seed["fresh"]) / float(seed["prompt"])
    seconds = optimizer = 0.0
    for role, row in by_role.items():
        prompt = float(row["prompt"] or 0)
        fresh = prompt * fresh_share if role == "prediction" and fresh_share else None
        size = CallSize(prompt, float(row["completion"] or 0), fresh)
        if role in OPTIMIZER_ROLES:
            optimizer += row["calls"] * pace.call(size, long=True) / alone_share
        else:
            seconds += row["calls"] * pace.call(size, long=role == "judge") / width
    return seconds, optimizer
