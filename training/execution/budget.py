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

:class:`BudgetWatch` checks them after every training step (batch), at every epoch end and
before every test evaluation. At a cap it sets ``program.stop_training`` (the engine stops
after the current batch, never mid-batch), and the attempt ends ``stopped`` with the message
:func:`message` ("stopped: budget reached …"), keeping its candidates, epochs and best
program. :func:`training.runs.launch.resume_with_caps` takes new caps (above what was used) and resumes it.
"""

from __future__ import annotations

import time
from typing import Any

from asgiref.sync import sync_to_async

from training.engine import bounds
from training.engine.callbacks import Callback
from training.models import Run

#: The caps a run may set (each optional), bounds closed like every other form bound.
BUDGET = {
    "budget_calls": bounds.IntRange(
        1, 10_000_000, help="Stop after the step that reaches this many LM calls; blank: no cap."
    ),
    "budget_cost": bounds.FloatRange(
        0.01, 100_000.0, help="Stop after the step that reaches this cost in dollars."
    ),
    "budget_minutes": bounds.FloatRange(  # at most a week
        0.1, 10_080.0, help="Stop after the step that reaches this many minutes of work."
    ),
}
LABELS = {
    "budget_calls": "Cap on LM calls",
    "budget_cost": "Cap on cost ($)",
    "budget_minutes": "Cap on minutes",
}
UNITS = {"budget_calls": "LM calls", "budget_cost": "dollars", "budget_minutes": "minutes"}
STOPPED_PREFIX = "stopped: budget reached"


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


def message(key: str, used: dict[str, Any], caps: dict[str, Any]) -> str:
    """``stopped: budget reached (42 LM calls of a 40 LM calls cap)``."""
    return (
        f"{STOPPED_PREFIX} ({describe(key, used[key])} used, cap {describe(key, caps[key])}); "
        "resume with a higher cap to go on"
    )


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
