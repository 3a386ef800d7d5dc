"""Forecast of a run before launch: LM calls, tokens, cost and time for the whole run.

Calls come from the configuration and the data by the engine's counting rule
(``training.engine.forecast.count_calls``: what ``fit`` and the evaluations around it do per
optimizer). Tokens, cost and time per call come from a short measured trial: a few
predictions of the program on its model, made by a worker (where the local models are
already loaded and where the run will execute: the :func:`forecast_trial` task), bounded by
:data:`TRIAL_SECONDS`, and cached in the web process for :data:`TRIAL_CACHE_SECONDS` by
(program document, dataset). The launch form asks again while the trial runs
(:func:`trial_state` says ``measuring``); a model that cannot be reached is said in words
instead of numbers.

At launch the forecast is stored in the run (``Run.forecast``, :func:`at_launch`: the counts,
plus the trial's figures when one is cached); the run page shows it against the actual.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from typing import Any

from celery import shared_task
from celery.result import AsyncResult
from django.core.cache import cache

import training.engine as synalinks
from datasets.services import get_split
from training import conf
from training.engine import forecast as engine_forecast
from training.engine.data_model import create_data_model
from training.engine.language_models.redaction import redact
from training.engine.modules.chain_of_thought import ChainOfThought
from training.engine.optimizers.mutation import VariableEvolver, batch_report
from training.execution import budget, run_config
from training.programs.lm import ModelStringError, make_embedding_model, make_language_model
from training.programs.programs import ProgramError, program_from_json

logger = logging.getLogger(__name__)

#: The trial's predictions: one to warm up (a model still loading, a first connection), one
#: alone, then a batch of this many; for OMEGA, one mutation call on its model too.
TRIAL_BATCH = 2
#: Bound on the whole trial in the worker (seconds).
TRIAL_SECONDS = 90.0
#: How long the form waits for a worker to report (a worker busy with runs may not start it).
TRIAL_WAIT_SECONDS = 180.0
TRIAL_CACHE_SECONDS = 600
TRIAL_FAILURE_CACHE_SECONDS = 30
TRIAL_TASK = "training.forecast_trial"


# -- counting ---------------------------------------------------------------------------------


def _engine_program(program_row: Any) -> Any:
    return program_from_json(program_row.engine_json)


def _inputs(engine: Any, rows: list[dict]) -> list[Any]:
    input_model = engine.inputs[0].data_model
    names = list(input_model.model_fields)
    return [input_model(**{name: row.get(name) for name in names}) for row in rows]


def shape_for(program_row: Any, dataset: Any, config: dict[str, Any]) -> engine_forecast.RunShape:
    """The engine's :class:`RunShape` of a run configuration on a dataset."""
    engine = _engine_program(program_row)
    train_rows, _ = get_split(dataset, "train")
    test_rows, _ = get_split(dataset, "test")
    lm_modules = [m for m in engine.modules if getattr(m, "language_model", None) is not None]
    optimizer = config["optimizer"]["name"]
    params = config["optimizer"].get("params") or {}
    variables = [v.value for v in engine.trainable_variables]
    if optimizer == "RandomFewShot":
        proposes = int(params.get("nb_max_examples", 3)) > 0 and any(
            "examples" in value for value in variables
        )
    elif optimizer == "NearestFewShot":  # a pool for each Generator state (with examples)
        proposes = any("examples" in value for value in variables)
    else:  # OMEGA: an LM call per step when a variable has fields its LM may write
        proposes = any(set(value) - {"examples"} for value in variables)
    nearest = _nearest_shape(params) if optimizer == "NearestFewShot" else {}
    return engine_forecast.RunShape(
        train_inputs=_inputs(engine, train_rows),
        test_size=len(test_rows),
        epochs=int(config["epochs"]),
        batch_size=int(config["batch_size"]),
        validation_split=float(config["validation_split"]),
        optimizer=optimizer,
        nb_candidates=int(params.get("nb_candidates", 1)),
        nb_min_examples=int(params.get("nb_min_examples", 1)),
        nb_max_examples=int(params.get("nb_max_examples", 3)),
        proposes=proposes,
        # A ChainOfThought's examples come only from full-reward predictions.
        proposes_certain=not any(isinstance(m, ChainOfThought) for m in lm_modules),
        lm_modules=max(1, len(lm_modules)),
        deterministic=all(m.deterministic for m in lm_modules if hasattr(m, "deterministic")),
        evaluations_before=int(config["evaluations_before"]) if test_rows else 0,
        evaluations_after=int(config["evaluations_after"]) if test_rows else 0,
        samples=min(int(conf.get("TRAINBOARD_SAMPLE_PREDICTIONS")), len(test_rows)),
        judge_calls=run_config.judge_calls(config),
        **nearest,
    )


def _nearest_shape(params: dict[str, Any]) -> dict[str, int]:
    """NearestFewShot's part of the shape: its pool's size and its embedding model's batch
    (texts a request), which the engine counts the embedding requests by."""
    shape = {"pool_size": int(params.get("pool_size") or engine_forecast.RunShape.pool_size)}
    try:
        model = make_embedding_model(params.get("embedding_model") or "")
    except ModelStringError:
        return shape  # the engine's default batch
    batch = getattr(model, "batch_size", None)
    if isinstance(batch, int) and batch > 0:
        shape["embedding_batch_size"] = batch
    return shape


# -- the trial --------------------------------------------------------------------------------


def trial_key(program_row: Any, dataset: Any, optimizer_model: str = "") -> str:
    """Cache key: the program's document (its model included), the dataset, and the
    optimizer's model when its calls are measured too."""
    document = json.dumps(program_row.engine_json, sort_keys=True, default=str)
    digest = hashlib.sha1(f"{document}|{dataset.pk}|{optimizer_model}".encode()).hexdigest()
    return f"forecast-trial:{digest}"


def optimizer_model(config: dict[str, Any]) -> str:
    """The model whose calls an OMEGA run's mutations make ("" for RandomFewShot: none)."""
    spec = config.get("optimizer") or {}
    if spec.get("name") != "OMEGA":
        return ""
    return (spec.get("params") or {}).get("language_model") or config.get("model") or ""


def run_trial(program_row: Any, dataset: Any, mutation_model: str = "") -> dict[str, Any]:
    """A few predictions of the program on its model (and, with ``mutation_model``, one
    OMEGA mutation of its first variable on that model): ``{"trial": Trial dict}`` or
    ``{"error": what went wrong, in words}``. Bounded by :data:`TRIAL_SECONDS`."""
    try:  # this one is called: its saved endpoint's URL and key, in memory
        engine = program_from_json(program_row.engine_json, owner=program_row.owner)
    except ProgramError as exc:
        return {"error": f"This program cannot run here: {exc}"}
    rows, targets = get_split(dataset, "train")
    if not rows:
        rows, targets = get_split(dataset, "test")
    if not rows:
        return {"error": "the dataset has no rows to try the model on"}
    count = TRIAL_BATCH + 2
    x = _inputs(engine, (rows * count)[:count])
    mutation_lm = None
    if mutation_model:
        try:
            mutation_lm = make_language_model(mutation_model)
        except (ModelStringError, ValueError) as exc:
            return {"error": f"the optimizer's model cannot be used: {exc}"}

    async def trial() -> dict[str, Any]:
        await engine.predict(x[:1], batch_size=1)  # warm-up, not measured
        with synalinks.usage.track() as usage:
            started = time.perf_counter()
            await engine.predict(x[1:2], batch_size=1)
            single = time.perf_counter() - started
            started = time.perf_counter()
            outputs = await engine.predict(x[2:], batch_size=TRIAL_BATCH)
            batch = time.perf_counter() - started
        totals = usage.to_dict()
        if engine.predictions and engine.failed_predictions >= engine.predictions:
            first = next(iter(engine.prediction_errors), "no usable answer")
            return {"error": f"the model's answers failed: {first}"}
        calls = max(1, int(totals["calls"]))
        cost = totals.get("cost")
        measured: dict[str, Any] = {}
        if mutation_lm is not None:
            measured = await _mutation(engine, mutation_lm, x[2:], targets, outputs)
        return {
            "trial": engine_forecast.Trial(
                seconds_per_call=batch / TRIAL_BATCH,
                single_call_seconds=single,
                tokens_per_call=totals["total_tokens"] / calls,
                cost_per_call=None if cost is None else cost / calls,
                calls=calls + (1 if measured else 0),
                **measured,
            ).to_dict()
        }

    try:
        return asyncio.run(asyncio.wait_for(trial(), TRIAL_SECONDS))
    except TimeoutError:
        return {
            "error": f"the model did not answer {TRIAL_BATCH + 2} predictions within "
            f"{TRIAL_SECONDS:.0f} s"
        }
    except synalinks.LanguageModelUnreachable as exc:
        return {"error": f"the model cannot be reached: {exc}"}
    except synalinks.LanguageModelConfigError as exc:
        return {"error": f"the model refused the request: {exc}"}
    except Exception as exc:  # never a traceback on the form: say what failed
        logger.exception("forecast trial failed")
        return {"error": f"the trial failed: {type(exc).__name__}: {exc}"}


# Unlike the run tasks (which ignore results: project.redis_config), the form reads this one's
# result from the result store; every read is bounded by the Redis client timeouts there.
async def _mutation(
    engine: Any, language_model: Any, x: list, targets: list[dict], outputs: Any
) -> dict[str, float]:
    """One OMEGA mutation of the program's first variable on the trial's batch: its time and
    tokens (a failed call still took them; what it would have written does not matter).
    Nothing measured (``{}``: the estimate falls back on a ratio) when no call could be made."""
    variables = engine.trainable_variables
    if not variables:
        return {}
    try:
        target_model = create_data_model("Target", _target_fields(targets))
        y = [target_model(**row) for row in (targets * len(x))[: len(x)]]
        report = batch_report(x, y, list(outputs), [0.0] * len(x))
        evolver = VariableEvolver(variables[0], language_model, 0.3, 0.3, None)
    except Exception:  # a variable or targets the evolver cannot read: no measure
        logger.warning("forecast trial: no mutation to measure", exc_info=True)
        return {}
    with synalinks.usage.track() as usage:
        started = time.perf_counter()
        try:
            await evolver.mutate(variables[0].value, 0.0, report)
        except (synalinks.LanguageModelUnreachable, synalinks.LanguageModelConfigError):
            raise
        except Exception:  # a failed or unparsable mutation still measured its call
            pass
        seconds = time.perf_counter() - started
    totals = usage.to_dict()
    if not totals["calls"]:
        return {}
    return {
        "optimizer_call_seconds": seconds / int(totals["calls"]),
        "optimizer_tokens_per_call": totals["total_tokens"] / int(totals["calls"]),
    }


def _target_fields(targets: list[dict]) -> list[dict[str, str]]:
    first = targets[0] if targets else {}
    return [{"name": name, "type": "str", "description": name} for name in first]


@shared_task(
    name=TRIAL_TASK,
    ignore_result=False,
    soft_time_limit=TRIAL_SECONDS + 30,
    time_limit=TRIAL_SECONDS + 60,
)
def forecast_trial(program_id: int, dataset_id: int, mutation_model: str = "") -> dict[str, Any]:
    """The trial, in a worker (the local models are loaded there; runs execute there)."""
    from datasets.models import Dataset
    from training.models import Program

    program_row = Program.objects.get(pk=program_id)
    dataset = Dataset.objects.get(pk=dataset_id)
    return run_trial(program_row, dataset, mutation_model)


def trial_state(
    program_row: Any, dataset: Any, start: bool = True, mutation_model: str = ""
) -> dict[str, Any]:
    """``{"state": "ready", "trial": …}``, ``{"state": "error", "message": …}`` or
    ``{"state": "measuring"}`` (a worker was asked; ask again shortly). ``start=False`` only
    reads what is cached (no new trial)."""
    key = trial_key(program_row, dataset, mutation_model)
    found = cache.get(key)
    if found is not None:
        return found
    pending = cache.get(f"{key}:task")
    if pending is not None:
        try:
            result = AsyncResult(pending["id"], app=forecast_trial.app)
            if result.ready():
                value = result.get(timeout=2, propagate=False)
                result.forget()
                return _remember(key, value)
        except Exception as exc:
            return _remember(key, {"error": f"could not read the trial's result: {exc}"})
        if time.time() - pending["since"] > TRIAL_WAIT_SECONDS:
            return _remember(
                key,
                {
                    "error": f"no worker measured the model within {TRIAL_WAIT_SECONDS:.0f} s "
                    "(busy with other runs?)"
                },
            )
        return {"state": "measuring"}
    if not start:
        return {"state": "none"}
    try:
        sent = forecast_trial.apply_async(
            args=[program_row.pk, dataset.pk, mutation_model],
            expires=TRIAL_WAIT_SECONDS,
            retry=False,
        )
    except Exception as exc:
        return _remember(key, {"error": f"could not ask a worker to measure the model: {exc}"})
    cache.set(f"{key}:task", {"id": sent.id, "since": time.time()}, TRIAL_WAIT_SECONDS + 60)
    return {"state": "measuring"}


def _remember(key: str, value: Any) -> dict[str, Any]:
    cache.delete(f"{key}:task")
    if isinstance(value, dict) and isinstance(value.get("trial"), dict):
        state = {"state": "ready", "trial": value["trial"]}
        cache.set(key, state, TRIAL_CACHE_SECONDS)
        return state
    message = value.get("error") if isinstance(value, dict) else None
    text = redact(str(message or f"the trial failed: {value}"))[:500]  # no secret on a page
    state = {"state": "error", "message": text}
    cache.set(key, state, TRIAL_FAILURE_CACHE_SECONDS)
    return state


# -- the forecast -----------------------------------------------------------------------------


def forecast(
    program_row: Any, dataset: Any, config: dict[str, Any], measure: bool = True
) -> dict[str, Any]:
    """The forecast of a configuration (JSON: stored in the run at launch, rendered by the
    forecast partials). ``measure=False`` uses a cached trial only."""
    shape = shape_for(program_row, dataset, config)
    calls = engine_forecast.count_calls(shape)
    mutation_model = optimizer_model(config)
    state = trial_state(program_row, dataset, start=measure, mutation_model=mutation_model)
    measuring = state["state"] == "measuring"
    if state["state"] != "ready" and mutation_model:
        # OMEGA's own trial (with a mutation) is not ready: the program's trial, when cached,
        # still times its predictions (mutations at OPTIMIZER_CALL_RATIO), never "calls only".
        plain = trial_state(program_row, dataset, start=False)
        if plain["state"] == "ready":
            state = {**plain, "mutations_assumed": True}
    result: dict[str, Any] = {
        "calls": calls.total.rounded(),
        "parts": calls.to_dict(),
        "model": config.get("model") or program_row.model,
        "local": str(config.get("model") or program_row.model).startswith("local/"),
        "state": state["state"],
        "message": state.get("message", ""),
        # the figures are ready, but a worker still measures the mutations: ask again
        "still_measuring": measuring and state["state"] == "ready",
        "mutations_assumed": bool(state.get("mutations_assumed")),
    }
    if state["state"] == "ready":
        trial = engine_forecast.Trial(**state["trial"])
        estimate = engine_forecast.estimate(calls, trial).to_dict()
        result.update(
            tokens=estimate["tokens"],
            cost=estimate["cost"],
            seconds=estimate["seconds"],
            trial=state["trial"],
        )
        # the time range every page promises ("6–9 min"): the launch form, the home page
        result["time_text"] = seconds_text(result["seconds"]["low"], result["seconds"]["high"])
    result["summary"] = summary(result)
    result["cap_warnings"] = budget.cap_warnings(config, result, shape)
    return result


def at_launch(program_row: Any, dataset: Any, config: dict[str, Any]) -> dict[str, Any] | None:
    """What a run stores at launch: the counts, and the trial's figures when cached. Never
    stops a launch (a forecast that cannot be made is None, logged)."""
    try:
        return forecast(program_row, dataset, config, measure=False)
    except Exception:
        logger.exception("forecast at launch failed")
        return None


# -- words ------------------------------------------------------------------------------------


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
    """ "about 420 calls, 190 k tokens, $0.00 (local), 6–9 min"."""
    calls = result["calls"]
    parts = [f"about {calls['expected']} calls"]
    if "seconds" in result:
        parts.append(f"{tokens_text(result['tokens']['expected'])}")
        parts.append(cost_text(result["cost"], result["local"]))
        parts.append(
            result.get("time_text")
            or seconds_text(result["seconds"]["low"], result["seconds"]["high"])
        )
    return ", ".join(parts)


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
    calls_text = f"about {calls['expected']}"
    if calls["low"] != calls["high"]:
        calls_text += f" ({calls['low']}–{calls['high']})"
    row("LM calls", calls_text, str(run.lm_calls), calls["expected"], run.lm_calls)
    if "seconds" in stored:
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
        span = stored["seconds"]
        row(
            "Time",
            seconds_text(span["low"], span["high"]),
            duration_text(seconds),
            span["expected"],
            seconds,
        )
    return rows
