"""The calls a configuration leaves to the model's answers, expected where its last runs went.

A run's calls are counted from its configuration (:func:`~training.forecasting.forecast.count_calls`)
as a :class:`~training.forecasting.forecast.Span`: exact where the configuration decides,
``low`` … ``high`` where the answers do (whether an epoch starts under a new best and predicts
its training rows again, whether an OMEGA step gives a new value to score). Nothing before a
run knows those answers, but the runs of the same program with the same optimizer show where
the model's answers took the count: the :func:`share` of the open range a finished run used.
The next forecast of that program and optimizer expects its calls at that share
(:func:`settled`), its range unchanged. A program not yet run with that optimizer takes the
share of the optimizer's runs of the model's other programs of the same shape
(:func:`optimizer_share`): how often a model's candidates beat its seeds is much the model's
doing (on the local model, four public label tasks alike, a new best was far rarer than
chance alone would say). With no such run, the count's own ``expected``.

Example:
    >>> share(83, Span(69, 112, 141))  # a run that made 83 of 69–141 calls
    0.19...
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from training.forecasting.forecast import CallForecast, Span
from training.forecasting.measured import moving_mean

#: Shares kept per model, newest last (every program and optimizer of the model together: the
#: model's runs are what keeps one program's few runs from being pushed out by others').
KEPT = 64


def share(actual: float, counted: Span) -> float | None:
    """Where ``actual`` calls fell in the counted range, 0.0 (``low``) to 1.0 (``high``);
    None when the configuration decided the count (nothing was open)."""
    if counted.high <= counted.low:
        return None
    return min(1.0, max(0.0, (actual - counted.low) / (counted.high - counted.low)))


def kept(
    entries: list[Any],
    program: int | None,
    optimizer: str | None,
    value: float,
    shape: str | None = None,
) -> list:
    """``entries`` (a model's kept shares, newest last) with a finished run's ``value``;
    ``shape``: what makes its range what it was (another program's run lends its share only
    to a run of the same shape, :func:`optimizer_share`)."""
    entry = {"program": program, "optimizer": optimizer, "share": round(value, 3), "shape": shape}
    return [*[e for e in entries if isinstance(e, dict)], entry][-KEPT:]


def recent_share(
    entries: list[Any], program: int | None, optimizer: str | None
) -> tuple[float | None, int]:
    """Where the kept runs of ``program`` with ``optimizer`` took their open calls (the moving
    mean, the newest weighing most; None without such a run) and how many runs say so."""
    found = [
        float(e["share"])
        for e in entries
        if isinstance(e, dict)
        and e.get("program") == program
        and e.get("optimizer") == optimizer
        and e.get("share") is not None
    ]
    return (moving_mean(found), len(found)) if found else (None, 0)


def optimizer_share(
    entries: list[Any], optimizer: str | None, shape: str | None
) -> tuple[float | None, int]:
    """Where the kept runs of ``optimizer`` on any program, each of ``shape``, took their open
    calls (the moving mean, the newest weighing most; None without such a run) and how many
    runs say so. A share is a place in its run's range, and what that range holds depends on
    the run's shape (epochs, a validation split or none), so only runs of one shape share."""
    found = [
        float(e["share"])
        for e in entries
        if isinstance(e, dict)
        and shape is not None
        and e.get("optimizer") == optimizer
        and e.get("shape") == shape
        and e.get("share") is not None
    ]
    return (moving_mean(found), len(found)) if found else (None, 0)


def at_share(span: Span, value: float) -> Span:
    return Span(span.low, span.low + value * (span.high - span.low), span.high)


def settled(calls: CallForecast, value: float) -> CallForecast:
    """``calls`` with every open part expected at ``value`` of its range."""
    spans: dict[str, Any] = {
        f.name: at_share(getattr(calls, f.name), value)
        for f in fields(calls)
        if isinstance(getattr(calls, f.name), Span)
    }
    return replace(calls, **spans)
