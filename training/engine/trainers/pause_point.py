"""Where a paused ``fit`` stopped, so that another ``fit`` goes on from exactly there.

Why: a pause (``program.pause_requested = True``, e.g. the dashboard's Pause) takes effect at
the next batch boundary, not only at an epoch's end. What a batch boundary holds besides the
program's own state (variables, candidates, the optimizer's state and random generator,
saved by ``get_config``) is small: which batch comes next in which epoch, the training
rewards of the epoch's batches done so far (the epoch's ``reward`` log is their mean) and
each metric's running state. The batches' order is drawn from ``(seed, epoch)``
(``EpochIterator``), so the same seed gives the same remaining batches.

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


@dataclass
class PausePoint:
    """The next batch to train (``batch`` of ``epoch``; ``batch`` may be the epoch's step
    count: every batch done, the epoch's end still to come), the epoch's training rewards so
    far and each metric's state (``Metric.get_state``), in ``compile(metrics=...)`` order."""

    epoch: int
    batch: int
    rewards: list[float] = field(default_factory=list)
    metrics: list[list[float]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "batch": self.batch,
            "rewards": [float(r) for r in self.rewards],
            "metrics": [list(state) for state in self.metrics],
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
        )


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
