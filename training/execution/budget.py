"""Budget caps of a run: at most so many LM calls, dollars or minutes.

The caps live in the run's configuration under ``budget_calls``, ``budget_cost`` and
``budget_minutes`` (None: no cap); their bounds are :data:`BUDGET`, defined here once (the
launch form, the resume form and :func:`caps_from` read them). What counts:

- calls: the run's LM calls over all its attempts (``Run.lm_calls``, memo and cache hits
  are free);
- cost: the run's usage cost in dollars (a provider whose price is unknown cannot be capped
  by cost: that cap is then never reached, and the run page says so);
- minutes: the time the run's attempts spent working (``Run.active_seconds``; the time a
  stopped run waits for its resume does not count).

:func:`call_budget` turns what is left of the caps into the engine's
:class:`~training.engine.language_models.budget.CallBudget`, applied around the whole attempt:
every LM and embedding attempt (concurrent ones, retries, the optimizer's and the judge's
included) reserves its call and its bound before it starts, and the time cap is a deadline
that cuts a call in flight, so a run stops *at or under* each cap, never after it. While the
evaluations before and ``fit`` run, the calls of the evaluations after training
(:func:`after_evaluation_calls`) are held back, so a capped run still evaluates its best
program so far on the test split. :class:`BudgetWatch` records the working time and says which
cap was reached; the attempt ends ``stopped`` with the message :func:`message` ("stopped:
budget reached …"), keeping its candidates, epochs and best program.
:func:`training.runs.launch.resume_with_caps` takes new caps (above what was used) and resumes it.
"""

from __future__ import annotations

import math
import time
from typing import Any

from asgiref.sync import sync_to_async

import training.engine as synalinks
from training.engine import bounds
from training.engine.callbacks import Callback
from training.models import Run

#: The caps a run may set (each optional), bounds closed like every other form bound.
BUDGET = {
    "budget_calls": bounds.IntRange(
        1, 10_000_000, help="The run never makes more LM calls than this; blank: no cap."
    ),
    "budget_cost": bounds.FloatRange(
        0.01,
        100_000.0,
        help="The run never spends more dollars than this (when the price is known).",
    ),
    "budget_minutes": bounds.FloatRange(  # at most a week
        0.1, 10_080.0, help="The run stops within this many minutes of work."
    ),
}
LABELS = {
    "budget_calls": "Cap on LM calls",
    "budget_cost": "Cap on cost ($)",
    "budget_minutes": "Cap on minutes",
}
UNITS = {"budget_calls": "LM calls", "budget_cost": "dollars", "budget_minutes": "minutes"}
STOPPED_PREFIX = "stopped: budget reached"
#: The engine budget's cap behind each configuration key.
ENGINE_CAPS = {"calls": "budget_calls", "cost": "budget_cost", "seconds": "budget_minutes"}
#: Seconds the engine's deadline keeps before the minutes cap, for what an attempt does after
#: its last call (storing the results).
WRAP_UP_SECONDS = 2.0
#: Extra calls held for the evaluations after training, for their parse retries (a share).
AFTER_EVALUATION_MARGIN = 0.1
#: What the stop message says about the test evaluation of a capped run.
AFTER_EVALUATION_NOTES = {
    "evaluated": "the best program so far was evaluated on the test split",
    "skipped": (
        "its test evaluation was skipped: the cap left no room for it (resume with a higher "
        "cap to evaluate it)"
    ),
}


class BudgetError(ValueError):
    """Caps that cannot be used; ``errors`` maps each field to its message."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{field}: {text}" for field, text in errors.items()))


def caps_from(data: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    """The configuration's caps from a flat dict (form data); problems go to ``errors``."""
    caps: dict[str, Any] = {}
    for key, bound in BUDGET.items():
        value = data.get(key)
        if value is None or value == "":
            caps[key] = None
            continue
        problem = bound.problem(value)
        if problem:
            errors[key] = problem
            caps[key] = None
            continue
        caps[key] = int(value) if isinstance(bound, bounds.IntRange) else float(value)
    return caps


def caps_of(config: dict[str, Any]) -> dict[str, Any]:
    """The caps a stored configuration sets (missing: None)."""
    return {key: config.get(key) for key in BUDGET}


def used_of(run: Run) -> dict[str, Any]:
    """What the run has used so far, in the caps' units (cost None: unknown)."""
    usage = run.usage or {}
    cost = usage.get("cost")
    return {
        "budget_calls": int(run.lm_calls or 0),
        "budget_cost": None if cost is None and run.lm_calls else float(cost or 0.0),
        "budget_minutes": float(run.active_seconds or 0.0) / 60.0,
    }


def suggested_caps(run: Run) -> dict[str, Any]:
    """What the resume form offers: each cap the run set, raised to what the run has used
    plus the cap again (as much room as it first had), rounded up to the field's step, so the
    offer is always one :func:`training.runs.launch.resume_with_caps` accepts (above what was
    used, within :data:`BUDGET`); a cap the run did not set stays blank."""
    caps, used = caps_of(run.config or {}), used_of(run)
    offer: dict[str, Any] = {}
    for key, cap in caps.items():
        bound, spent = BUDGET[key], used[key]
        if cap is None:
            offer[key] = None
            continue
        base = float(spent) if spent is not None else 0.0
        if isinstance(bound, bounds.IntRange):
            value: float = int(base) + int(cap)
        else:
            step = 0.01 if key == "budget_cost" else 0.1
            value = math.ceil(round((base + float(cap)) / step, 6)) * step
            value = round(value, 2)
        if bound.max is not None:
            value = min(value, bound.max)
        offer[key] = value if value > base and bound.problem(value) is None else None
    return offer


def reached(caps: dict[str, Any], used: dict[str, Any]) -> str | None:
    """The first cap ``used`` has reached (its key), or None."""
    for key in BUDGET:
        cap, value = caps.get(key), used.get(key)
        if cap is not None and value is not None and value >= cap:
            return key
    return None


def describe(key: str, value: float) -> str:
    if key == "budget_calls":
        return f"{int(value)} LM calls"
    if key == "budget_cost":
        return f"${value:.2f}"
    return f"{value:.1f} min"


def message(key: str, used: dict[str, Any], caps: dict[str, Any], after: str | None = None) -> str:
    """``stopped: budget reached (40 LM calls used, cap 40 LM calls); …``; ``after`` (a key of
    :data:`AFTER_EVALUATION_NOTES`) says what became of the test evaluation."""
    value = used.get(key)
    shown = "all" if value is None else describe(key, value)
    note = f"; {AFTER_EVALUATION_NOTES[after]}" if after else ""
    return (
        f"{STOPPED_PREFIX} ({shown} used, cap {describe(key, caps[key])}){note}; "
        "resume with a higher cap to go on"
    )


def stopped_by(run: Run) -> str | None:
    """The cap that stopped ``run`` (its key), read from its stop :func:`message`; None when
    no cap stopped it. A run stops *at or under* its cap (the next call could not be
    afforded), so "reached" cannot be read from the figures alone."""
    error = run.error or ""
    if run.status != Run.STOPPED or not error.startswith(STOPPED_PREFIX):
        return None
    for key, cap in caps_of(run.config or {}).items():
        if cap is not None and f"cap {describe(key, cap)})" in error:
            return key
    return None


def call_budget(
    caps: dict[str, Any], base_usage: dict[str, Any], base_seconds: float, started: float
) -> synalinks.CallBudget | None:
    """The engine budget of an attempt: what the earlier attempts left of each cap (None: the
    run has no cap). ``started`` is the attempt's ``time.monotonic()`` start (the watch's),
    so the engine's deadline and the run's working minutes count from the same moment.

    Args:
        caps: the configuration's caps (:func:`caps_of`).
        base_usage: the usage of the earlier attempts (``Run.usage``).
        base_seconds: their working seconds (``Run.active_seconds``).
        started: when this attempt's clock started.

    Returns:
        A :class:`~training.engine.language_models.budget.CallBudget`, or None.
    """
    if all(value is None for value in caps.values()):
        return None
    calls = cost = seconds = None
    if caps.get("budget_calls") is not None:
        calls = max(0, int(caps["budget_calls"]) - int(base_usage.get("calls") or 0))
    if caps.get("budget_cost") is not None:
        cost = max(0.0, float(caps["budget_cost"]) - float(base_usage.get("cost") or 0.0))
    if caps.get("budget_minutes") is not None:
        left = float(caps["budget_minutes"]) * 60.0 - float(base_seconds or 0.0)
        seconds = max(0.0, left - WRAP_UP_SECONDS)
    return synalinks.CallBudget(calls=calls, cost=cost, seconds=seconds, started=started)


def after_evaluation_calls(passes: int, test_size: int, modules: int, judge_calls: int) -> int:
    """The LM calls the evaluations after training make (each test example: one call per
    module that has a language model, plus the judge's), with a margin for parse retries:
    what a capped fit leaves untouched so its best program can still be evaluated.

    Args:
        passes: evaluations after training still to run.
        test_size: examples in the test split.
        modules: the program's modules that call a language model.
        judge_calls: LM calls the reward makes per example (1 for LMAsJudge).
    """
    if passes <= 0 or test_size <= 0:
        return 0
    calls = passes * test_size * (max(1, modules) + judge_calls)
    return calls + max(1, int(calls * AFTER_EVALUATION_MARGIN + 0.999))


def cap_warnings(config: dict[str, Any], forecast: dict[str, Any], shape: Any) -> list[str]:
    """What the launch form says of each cap below the forecast: where it stops the run
    ("after about 3 of 8 batches") and what it keeps for the test evaluation after it.

    Args:
        config: the run configuration (its caps).
        forecast: :func:`training.execution.forecast.forecast`'s result (calls, and the
            measured cost and seconds when ready).
        shape: the engine's ``RunShape`` the forecast counted.

    Returns:
        One sentence per cap the forecast passes (none: every cap leaves room for the run).
    """
    parts = forecast["parts"]
    batches = int(parts["steps"]) * int(parts["epochs"])
    total = int(forecast["calls"]["expected"])
    per_pass = shape.test_size * (max(1, shape.lm_modules) + shape.judge_calls)
    before = shape.evaluations_before * per_pass
    held = after_evaluation_calls(
        shape.evaluations_after, shape.test_size, shape.lm_modules, shape.judge_calls
    )
    fit_calls = max(1, total - before - shape.evaluations_after * per_pass)
    warnings = []
    cap = config.get("budget_calls")
    if cap is not None and cap < total:
        room = cap - before - min(held, cap)
        head = f"This cap ({cap} LM calls) is below the forecast ({total})"
        if room <= 0:
            warnings.append(
                f"{head}: it leaves no calls for training once the test evaluations are paid "
                f"({before} before training, {min(held, cap)} kept for the one after)."
            )
        else:
            done = min(batches, int(room * batches / fit_calls))
            kept = f"; {held} calls are kept to evaluate the best program after it" if held else ""
            warnings.append(
                f"{head}: it stops the run after about {done} of {batches} batches{kept}."
            )
    for key, value, unit in (
        ("budget_cost", (forecast.get("cost") or {}).get("expected"), "cost"),
        ("budget_minutes", (forecast.get("seconds") or {}).get("expected"), "time"),
    ):
        cap = config.get(key)
        if cap is None or not value:
            continue
        needed = value / 60.0 if key == "budget_minutes" else value
        if cap < needed:
            done = min(batches, int(cap / needed * batches))
            warnings.append(
                f"This cap ({describe(key, cap)}) is below the forecast {unit} "
                f"({describe(key, needed)}): it stops the run after about {done} of {batches} "
                "batches."
            )
    return warnings


class BudgetWatch(Callback):
    """Watches one attempt's spending against its run's caps.

    Args:
        run_id, attempt: the attempt (its ``active_seconds`` writes are filtered on it).
        caps: the configuration's caps (:func:`caps_of`).
        usage: a function returning the run's merged usage so far (all attempts).
        base_seconds: working seconds of the earlier attempts.

    Example:
        >>> watch = BudgetWatch(run.pk, run.attempt, caps_of(run.config), callback.usage_fields,
        ...                     run.active_seconds)
        >>> await program.fit(..., callbacks=[callback, watch])
        >>> watch.reached  # "budget_calls" or None
    """

    def __init__(
        self,
        run_id: int,
        attempt: int,
        caps: dict[str, Any],
        usage: Any,
        base_seconds: float = 0.0,
    ):
        super().__init__()
        self.run_id = run_id
        self.attempt = attempt
        self.caps = caps
        self.usage = usage
        self.base_seconds = float(base_seconds or 0.0)
        self.started = time.monotonic()
        self.reached: str | None = None
        self.used: dict[str, Any] = {}

    @property
    def active(self) -> bool:
        return any(value is not None for value in self.caps.values())

    def seconds(self) -> float:
        return self.base_seconds + (time.monotonic() - self.started)

    def _check(self) -> bool:
        """Record the working time, and whether a cap is reached (sync: ORM)."""
        seconds = self.seconds()
        Run.objects.filter(pk=self.run_id, attempt=self.attempt, status=Run.RUNNING).update(
            active_seconds=seconds
        )
        fields = self.usage()
        usage = fields.get("usage") or {}
        calls = int(fields.get("lm_calls", usage.get("calls", 0)) or 0)
        cost = usage.get("cost")
        self.used = {
            "budget_calls": calls,
            "budget_cost": None if cost is None and calls else float(cost or 0.0),
            "budget_minutes": seconds / 60.0,
        }
        if self.reached is None:
            self.reached = reached(self.caps, self.used)
        return self.reached is not None

    async def check(self) -> bool:
        """True when a cap is reached (then the run should stop after this step)."""
        return await sync_to_async(self._check)()

    async def refused(self, exhausted: Any) -> None:
        """The engine budget refused a call (``program.budget_exhausted``): record the usage
        and name its cap as the one reached."""
        await self.check()
        if self.reached is None and exhausted is not None:
            self.reached = ENGINE_CAPS.get(exhausted.cap)

    async def _step_done(self) -> None:
        if await self.check() and self.program is not None:
            self.program.stop_training = True  # after this batch: the engine's own stop

    async def on_batch_end(self, batch, logs=None):
        await self._step_done()

    async def on_epoch_end(self, epoch, logs=None):
        await self._step_done()

    @property
    def message(self) -> str:
        return message(self.reached, self.used, self.caps) if self.reached else ""

    def message_after(self, after: str | None) -> str:
        """:attr:`message`, saying what became of the test evaluation (``after``)."""
        return message(self.reached, self.used, self.caps, after) if self.reached else ""
