"""Where a paused ``fit`` stopped, so that another ``fit`` goes on from exactly there.

Why: a pause (``program.pause_requested = True``, e.g. the dashboard's Pause) takes effect at
the next batch boundary, not only at an epoch's end. What a batch boundary holds besides the
program's own state (variables, candidates, the optimizer's state and random generator,
saved by ``get_config``) is small: which batch comes next in which epoch, the training
rewards of the epoch's batches done so far (the epoch's ``reward`` log is their mean) and
each metric's running state. The batches' order is drawn from ``(seed, epoch)``
(``EpochIterator``), so the same seed gives the same remaining batches. It also keeps the
epoch's predictions so far (:class:`EpochPredictions`: made, failed, each error's count):
the program's running totals start again at 0 in the fit that resumes, and what judges the
whole epoch (e.g. "every prediction of the epoch failed") adds them to the rest.

A point is plain JSON (it is stored between the two fits), read back checked: a value that is
not one is refused with a clear ``ValueError``, never trusted.

Example:
    >>> point = PausePoint(epoch=1, batch=2, rewards=[1.0, 0.0], metrics=[[1.0, 2]])
    >>> PausePoint.from_json(point.to_json()) == point
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: The most distinct error messages a point keeps (the first seen; their counts still add
#: up in ``failed``): the messages are short, a point stays small.
MAX_POINT_ERRORS = 20


@dataclass
class EpochPredictions:
    """Predictions made in (a part of) an epoch: how many, how many failed, and each
    distinct error's count in the order first seen (the program's ``predictions``,
    ``failed_predictions``, ``prediction_errors`` over that part).

    Example:
        >>> start = EpochPredictions(made=4, failed=1, errors={"timeout": 1})
        >>> now = EpochPredictions(made=10, failed=3, errors={"timeout": 2, "HTTP 400": 1})
        >>> now.minus(start)
        EpochPredictions(made=6, failed=2, errors={'timeout': 1, 'HTTP 400': 1})
    """

    made: int = 0
    failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    @classmethod
    def totals(cls, program: Any) -> EpochPredictions:
        """The program's running totals now."""
        return cls(
            int(program.predictions),
            int(program.failed_predictions),
            dict(program.prediction_errors),
        )

    def minus(self, start: EpochPredictions) -> EpochPredictions:
        """What these totals hold beyond ``start`` (totals taken earlier)."""
        errors = {
            message: count - start.errors.get(message, 0)
            for message, count in self.errors.items()
            if count > start.errors.get(message, 0)
        }
        return EpochPredictions(self.made - start.made, self.failed - start.failed, errors)

    def plus(self, later: EpochPredictions) -> EpochPredictions:
        """These predictions, then ``later``'s (errors in the order first seen)."""
        errors = dict(self.errors)
        for message, count in later.errors.items():
            errors[message] = errors.get(message, 0) + count
        return EpochPredictions(self.made + later.made, self.failed + later.failed, errors)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON; the errors as ``[[message, count], …]`` (a list keeps their order in
        any store) and at most ``MAX_POINT_ERRORS`` of them."""
        kept = list(self.errors.items())[:MAX_POINT_ERRORS]
        return {
            "made": self.made,
            "failed": self.failed,
            "errors": [[message, count] for message, count in kept],
        }

    @classmethod
    def from_json(cls, data: Any) -> EpochPredictions:
        """The value ``to_json`` gave (none made for None: a point saved before they were
        kept); ValueError when ``data`` is not one."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ValueError("a pause point's predictions are an object with made, failed")
        made, failed, errors = data.get("made"), data.get("failed"), data.get("errors") or []
        if not all(_count(n) for n in (made, failed)) or failed > made:
            raise ValueError("a pause point's predictions are counts, failed at most made")
        if not isinstance(errors, list) or not all(
            isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and _count(e[1])
            for e in errors[:MAX_POINT_ERRORS]
        ):
            raise ValueError("a pause point's errors are [message, count] pairs")
        return cls(made, failed, {str(m): int(c) for m, c in errors[:MAX_POINT_ERRORS]})


@dataclass
class PausePoint:
    """The next batch to train (``batch`` of ``epoch``; ``batch`` may be the epoch's step
    count: every batch done, the epoch's end still to come), the epoch's training rewards so
    far, each metric's state (``Metric.get_state``), in ``compile(metrics=...)`` order, and
    the epoch's predictions so far (``predictions``; none at an epoch's start)."""

    epoch: int
    batch: int
    rewards: list[float] = field(default_factory=list)
    metrics: list[list[float]] = field(default_factory=list)
    predictions: EpochPredictions = field(default_factory=EpochPredictions)

    def to_json(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "batch": self.batch,
            "rewards": [float(r) for r in self.rewards],
            "metrics": [list(state) for state in self.metrics],
            "predictions": self.predictions.to_json(),
        }

    @classmethod
    def from_json(cls, data: Any) -> PausePoint:
        """The point ``to_json`` gave; ValueError when ``data`` is not one."""
        if not isinstance(data, dict):
            raise ValueError("a pause point is an object with epoch, batch, rewards, metrics")
        epoch, batch = data.get("epoch"), data.get("batch")
        rewards, metrics = data.get("rewards") or [], data.get("metrics") or []
        if not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (epoch, batch)
        ):
            raise ValueError("a pause point's epoch and batch are whole numbers from 0")
        if not isinstance(rewards, list) or not all(_finite(r) for r in rewards):
            raise ValueError("a pause point's rewards are numbers")
        if not isinstance(metrics, list) or not all(
            isinstance(s, list) and all(_finite(v) for v in s) for s in metrics
        ):
            raise ValueError("a pause point's metric states are lists of numbers")
        return cls(
            epoch=epoch,
            batch=batch,
            rewards=[float(r) for r in rewards],
            metrics=[[float(v) for v in s] for s in metrics],
            predictions=EpochPredictions.from_json(data.get("predictions")),
        )


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
