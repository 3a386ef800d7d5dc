"""The measured forecast's figures where the workers run: what each finished run observed per
call and the sizes learnt from its traces (kept in its model's ``ModelPace.sizes``), the
others' demand on the cores now, and the forecast of a configuration from them
(``training.forecasting.measured``).

:func:`record` is called by :func:`~training.execution.pace.learning.learn_from_run` for every
run that did its work; :func:`apply` gives a forecast (its calls as counted, its calls sized
from its prompts) its tokens and time from those observations (``training.execution.forecast``
calls it).

A model is kept where it is served: a program on a saved endpoint keeps its figures under
:func:`pace_key` (``"<model> @ <endpoint URL>"``): two endpoints serving the same model name
are two machines.
"""

from __future__ import annotations

import time
from typing import Any

from django.db.models import Count, Sum

from training.execution import forecast_text
from training.execution.pace import cpu_meter
from training.forecasting import decided
from training.forecasting.forecast import Span
from training.forecasting.measured import KEPT, CallSize, Observation, estimate, observe
from training.models import LMCallTrace, ModelPace

#: Where a model's observations are kept in ``ModelPace.sizes``.
OBSERVED_KEY = "observed"
#: Where the share of their open calls the model's runs used is kept (``forecasting.decided``).
DECIDED_KEY = "decided"
#: Where the characters per token of its prompts are kept in ``ModelPace.sizes``.
CHARS_KEY = "chars_per_token"
#: An LM judge's tokens per call on one program's data: keys of ``ModelPace.sizes`` that
#: start so (:func:`judge_data_key`).
JUDGE_DATA_PREFIX = "judge@"
#: The roles of the traces, as the forecast counts them (crossovers are mutations).
ROLE_OF = {
    "prediction": "prediction",
    "judge": "judge",
    "mutation": "mutation",
    "crossover": "mutation",
}
#: How long the others' demand is sampled for a forecast (seconds of the request).
SAMPLE_SECONDS = 0.2


def stored_sizes(key: str) -> dict[str, Any]:
    """What the runs of the model stored under ``key`` taught (``{}``: none yet)."""
    row = ModelPace.objects.filter(model=key).values("sizes").first()
    return dict((row or {}).get("sizes") or {})


def learned_size(sizes: dict[str, Any], role: str) -> CallSize | None:
    """A role's tokens per call learned from recent runs (None: none seen yet)."""
    found = sizes.get(role)
    if not isinstance(found, dict):
        return None
    return CallSize(float(found.get("prompt", 0)), float(found.get("completion", 0)))


def judge_data_key(program_id: int | None, dataset_id: int | None) -> str:
    """The key of an LM judge's tokens per call on one program's data, in ``ModelPace.sizes``.

    Example:
        >>> judge_data_key(3, 7)
        'judge@program3/dataset7'
    """
    return f"{JUDGE_DATA_PREFIX}program{program_id}/dataset{dataset_id}"


def pace_key(program_row: Any, model: str) -> str:
    """The key ``model``'s figures are kept under for ``program_row``: ``model`` itself, or
    ``"<model> @ <URL>"`` when the program calls ``model`` on a saved endpoint."""
    from training.programs import saved_endpoints
    from training.programs.programs import model_nodes

    for kind, node in model_nodes(getattr(program_row, "engine_json", None) or {}):
        config = node.get("config") or {}
        if kind != "language_model" or config.get("model") != model:
            continue
        name = str(config.get("endpoint") or "")
        endpoint = saved_endpoints.resolve(program_row.owner, name) if name else None
        if endpoint is not None:
            return f"{model} @ {endpoint.url}"
    return model


def others_now() -> float:
    """Cores' worth of CPU the other processes take now (a short sample; 0.0 when unknown)."""
    start = cpu_meter.sample()
    time.sleep(SAMPLE_SECONDS)
    end = cpu_meter.sample()
    if start is None or end is None or end.at <= start.at:
        return 0.0
    others = (end.busy - start.busy) - (end.own - start.own)
    return min(float(cpu_meter.cores()), max(0.0, others / (end.at - start.at)))


def threads(stored: dict[str, Any]) -> dict[str, float]:
    """Busy threads of each role's calls: a batch's calls at once (on this machine, up to the
    cores; a provider serves the whole batch at once); an optimizer's one at a time."""
    batch = float(stored.get("batch_size") or 1)
    wide = max(1.0, min(batch, float(cpu_meter.cores())) if stored.get("local") else batch)
    return {"prediction": wide, "judge": wide, "mutation": 1.0}


def sized(stored: dict[str, Any]) -> dict[str, float]:
    """A forecast's tokens per call by role as it sized them from its prompts (what a role no
    run observed costs): a prediction under a new candidate (scoring it, an epoch under it)
    and the others at the seed's prompts (its training and scoring, and the test passes:
    after ``fit`` the trained program's, a candidate's only when one won), weighed by their
    expected calls."""
    sizes = stored.get("sizes") or {}
    parts = stored.get("parts") or {}

    def total(name: str) -> float:
        size = sizes.get(name) or {}
        return float(size.get("prompt") or 0.0) + float(size.get("completion") or 0.0)

    def expected(part: str) -> float:
        return float((parts.get(part) or {}).get("expected") or 0.0)

    found = {role: total(role) for role in ("judge", "mutation") if sizes.get(role)}
    calls = expected("predictions") + expected("evaluations")
    under_candidates = min(expected("candidate_predictions"), calls)
    seed = total("prediction_seed") or total("prediction")
    candidates = total("prediction_candidates") or seed
    if calls > 0:
        found["prediction"] = (
            under_candidates * candidates + (calls - under_candidates) * seed
        ) / calls
    elif seed:
        found["prediction"] = seed
    return {role: value for role, value in found.items() if value > 0}


def recent_share(
    sizes: dict[str, Any], program: int | None, optimizer: str | None
) -> tuple[float | None, int]:
    """Where the model's kept runs of ``program`` with ``optimizer`` took their open calls
    (``sizes``: the model's, :func:`stored_sizes`)."""
    return decided.recent_share(sizes.get(DECIDED_KEY) or [], program, optimizer)


def optimizer_share(
    sizes: dict[str, Any], optimizer: str | None, config: dict[str, Any]
) -> tuple[float | None, int]:
    """Where the model's kept runs of ``optimizer``, on any program, of the shape of
    ``config`` (:func:`calls_shape`) took their open calls."""
    return decided.optimizer_share(sizes.get(DECIDED_KEY) or [], optimizer, calls_shape(config))


def calls_shape(config: dict[str, Any]) -> str:
    """What decides what a run's open calls are, besides its program and data: its epochs
    and whether it has a validation and a selection split (without a validation split a new
    best costs nothing; a selection split adds the contenders' scoring)."""
    return (
        f"epochs={int(config.get('epochs') or 0)}"
        f" validation={float(config.get('validation_split') or 0) > 0}"
        f" selection={float(config.get('selection_split') or 0) > 0}"
    )


def observations(key: str) -> list[Observation]:
    return observations_in(stored_sizes(key))


def observations_in(sizes: dict[str, Any]) -> list[Observation]:
    """The observations kept in a model's ``sizes`` (:func:`stored_sizes`)."""
    kept = sizes.get(OBSERVED_KEY) or []
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
    cpt = stored.get("chars_per_token")
    found = observe(
        roles,
        float(run.active_seconds),
        others,
        threads(stored),
        cpu_meter.cores(),
        # its predictions' size (sized from its prompts; a judge's or a mutation's is learned),
        # to scale what it measured to another run's prompts (``scaled_tokens``)
        sized_chars=_prediction_chars(stored, cpt),
        owner=run.owner_id,
        program=run.program_id,
        optimizer=((run.config or {}).get("optimizer") or {}).get("name"),
        at=time.time(),
    )
    share = _decided(run, stored)
    if share is not None:
        sizes[DECIDED_KEY] = decided.kept(
            sizes.get(DECIDED_KEY) or [],
            run.program_id,
            ((run.config or {}).get("optimizer") or {}).get("name"),
            share,
            calls_shape(run.config or {}),
        )
    if found is None:
        return
    kept = [item for item in sizes.get(OBSERVED_KEY) or [] if isinstance(item, dict)]
    sizes[OBSERVED_KEY] = [*kept, found.to_dict()][-KEPT:]


def _prediction_chars(stored: dict[str, Any], chars_per_token: Any) -> dict[str, float]:
    """A stored forecast's sized prediction, in :class:`Observation`'s ``sized_chars`` unit
    (``{}`` for a forecast stored without the characters per token it sized at)."""
    size = sized(stored).get("prediction")
    if not size or not chars_per_token:
        return {}
    return {"prediction": size * float(chars_per_token)}


def _decided(run: Any, stored: dict[str, Any]) -> float | None:
    """Where a finished run's calls fell in the range its forecast counted (None: a run a cap
    or a person stopped, or one whose count the configuration decided)."""
    if run.status != run.SUCCEEDED or not stored.get("calls"):
        return None
    return decided.share(float(run.lm_calls), _span(stored["calls"]))


def _span(part: dict[str, Any] | None) -> Span:
    part = part or {}
    return Span(
        float(part.get("low", 0)), float(part.get("expected", 0)), float(part.get("high", 0))
    )


def apply(
    result: dict[str, Any], program_row: Any, config: dict[str, Any], stored: dict[str, Any]
) -> dict[str, Any]:
    """``result`` (its calls counted, its calls sized) with its tokens and time from the
    observations in ``stored``, its model's row (:mod:`training.forecasting.measured`); no time
    (``seconds`` None) while no call of the model was ever observed."""
    parts = result["parts"]
    calls = {
        "prediction": _span(parts["predictions"]) + _span(parts["evaluations"]),
        "judge": _span(parts["judge"]),
        "mutation": _span(parts["optimizer"]),
    }
    found = estimate(
        calls,
        observations_in(stored),
        others_now() if result.get("local") else 0.0,
        cpu_meter.cores(),
        threads(result),
        sized=sized(result),
        program=getattr(program_row, "pk", None),
        owner=getattr(program_row, "owner_id", None),
        optimizer=(config.get("optimizer") or {}).get("name"),
        chars_per_token=result.get("chars_per_token"),
    )
    seconds = found.seconds
    result.update(
        tokens=found.tokens.rounded(),
        measured={"observed": found.observed, "slowdown": found.slowdown},
        assumptions=[*result.get("assumptions", []), *found.notes],
    )
    if seconds is None:
        result.update(seconds=None, seconds_expected_text=None, seconds_range_text=None)
        result["time_text"] = None
        return result
    result["seconds"] = {"low": seconds.low, "expected": seconds.expected, "high": seconds.high}
    result["seconds_expected_text"] = forecast_text.duration_text(seconds.expected)
    result["seconds_range_text"] = forecast_text.seconds_text(seconds.low, seconds.high)
    # the time range every page promises ("6–9 min"): the launch form, the home page
    result["time_text"] = result["seconds_range_text"]
    return result
