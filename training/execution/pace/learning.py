"""What every run a worker ends teaches the next forecasts of its model (``ModelPace.sizes``).

:func:`learn_from_run`, called after a run's last write, keeps what the run observed per call
(:func:`~training.execution.pace.measured.record`: each role's seconds and tokens per call and
the load it met), the characters per token of its prompts (what the forecast sizes a
program's prompts by), and the tokens per call its traces show for an LM judge's calls and
OMEGA's mutations, in the sizes of the model that made them (the forecast's ``pace_keys``: a
judge on another model than the program's is sized there).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db.models import Count, Sum

from training.execution import run_config
from training.execution.pace import cpu_meter
from training.execution.pace import measured as observed_calls
from training.execution.pace.cpu_meter import CpuSample
from training.execution.pace.measured import CHARS_KEY, JUDGE_DATA_PREFIX, judge_data_key
from training.forecasting.measured import MESSAGE_TOKENS
from training.models import LMCallTrace, ModelPace, Run

logger = logging.getLogger(__name__)

#: Roles whose tokens per call are learned from traces (crossovers count as mutations).
LEARNED_ROLES = {"judge": ("judge",), "mutation": ("mutation", "crossover")}
#: Weight of the newest run in the learned sizes (an exponential moving average).
SIZE_WEIGHT = 0.5
#: Prediction traces of a run read for its characters per token.
TRACES_READ = 50
#: An LM judge's tokens per call are also kept by the program and the data it judged
#: (:func:`judge_data_key`), for this many of them a model (the oldest dropped). Why: a
#: judge's critique follows the labels it compares (the demo's judge writes 152 answer tokens,
#: short samples 76), and one program's judge says little of another's.
JUDGE_DATA_KEPT = 20
#: The key, in ``ModelPace.sizes``, of those keys oldest first (the order they are dropped
#: in). Why a list: PostgreSQL's jsonb keeps an object's keys in its own order (shorter
#: first), not the order they were written in.
JUDGE_DATA_ORDER = "judge_data_order"


def learn_from_run(
    run_id: int, cpu: tuple[CpuSample | None, CpuSample | None] | None = None
) -> None:
    """Keep what run ``run_id`` observed for its model's next forecasts (see the module
    docstring).

    Only a run that did its work (succeeded, or stopped at a cap) with a forecast stored at
    launch teaches; never raises (a run's end must not fail on it). ``cpu``: the
    ``cpu_meter`` samples at the start and the end of its last attempt (the load the other
    processes put on it; None: unknown)."""
    try:
        _learn(run_id, cpu)
    except Exception:
        logger.exception("run %s: its observations were not kept", run_id)


def _learn(run_id: int, cpu: tuple[CpuSample | None, CpuSample | None] | None = None) -> None:
    run = (
        Run.objects.filter(pk=run_id)
        .only(
            "status",
            "forecast",
            "active_seconds",
            "lm_calls",
            "config",
            "program_id",
            "dataset_id",
            "owner_id",
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
    chars_per_token = _chars_per_token(traces.filter(role="prediction"))
    if chars_per_token:
        old = sizes.get(CHARS_KEY)
        keep = 1 - SIZE_WEIGHT if isinstance(old, int | float) and old > 0 else 0.0
        sizes[CHARS_KEY] = round(keep * float(old or 0) + (1 - keep) * chars_per_token, 3)
    ModelPace.objects.filter(pk=row.pk).update(sizes=sizes)


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
