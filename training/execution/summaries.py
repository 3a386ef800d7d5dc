"""Numbers the pages show, computed from stored rows: history series, before/after stats."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Any

from training.engine.utils import paired_bootstrap


def history(epoch_logs: Iterable[Any]) -> dict[str, Any]:
    """``{"epochs": [0, 1, ...], "series": {"reward": [...], "val_reward": [...], ...}}``.

    Keys keep first-seen order with ``reward`` first; a value missing in an epoch is None.
    """
    logs = sorted(((row.epoch, row.logs) for row in epoch_logs), key=lambda item: item[0])
    keys: list[str] = []
    for _, values in logs:
        for key in values:
            if key not in keys:
                keys.append(key)
    first = [key for key in ("reward", "val_reward") if key in keys]
    keys = first + [key for key in keys if key not in first]
    series = {key: [_num(values.get(key)) for _, values in logs] for key in keys}
    return {"epochs": [epoch for epoch, _ in logs], "series": series}


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    return None


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (0 for one value; None for none)."""
    if not values:
        return None, None
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    variance = sum((value - mean) ** 2 for value in values) / (len(values) - 1)
    return mean, math.sqrt(variance)


def per_example_means(evaluations: Iterable[Any], phase: str) -> list[float] | None:
    """Each test example's reward in ``phase``, averaged over that phase's evaluations.

    None when no evaluation of the phase stored per-example rewards, or when they disagree on
    how many examples there are (they would not pair example by example)."""
    lists = [
        [float(value) for value in evaluation.example_rewards]
        for evaluation in evaluations
        if evaluation.phase == phase and evaluation.example_rewards
    ]
    if not lists or len({len(values) for values in lists}) != 1:
        return None
    return [sum(column) / len(column) for column in zip(*lists, strict=True)]


def paired_test_difference(evaluations: Iterable[Any]) -> dict[str, Any] | None:
    """The paired bootstrap interval of test reward after minus before, over test examples.

    Each example's reward before is paired with its reward after (averaged over repeated
    evaluations of a phase); :func:`training.engine.utils.paired_bootstrap` gives the seeded
    95 % interval. None until both phases have per-example rewards for the same examples.
    """
    evaluations = list(evaluations)
    before = per_example_means(evaluations, "before")
    after = per_example_means(evaluations, "after")
    if before is None or after is None or len(before) != len(after):
        return None
    return dict(_bootstrap(tuple(before), tuple(after)))


@functools.lru_cache(maxsize=64)
def _bootstrap(before: tuple[float, ...], after: tuple[float, ...]) -> tuple:
    """Seeded, hence cacheable: a page and its live updates re-render the same stored rewards
    (10 000 resamples of thousands of examples take a noticeable fraction of a second)."""
    return tuple(paired_bootstrap(before, after).to_dict().items())


def outcome(evaluations: Iterable[Any], kept_seed: bool) -> str:
    """What a finished training came to (``Run.OUTCOME_CHOICES``): ``no_better`` when the
    trained program is its seed (no candidate beat it beyond noise on validation), else the
    test split's verdict on after − before (:func:`paired_test_difference`): ``improved``
    above 0, ``worse`` below, ``within_noise`` across it or without a test split."""
    if kept_seed:
        return "no_better"
    interval = paired_test_difference(evaluations)
    if interval is None or interval["within_noise"]:
        return "within_noise"
    return "improved" if interval["low"] > 0 else "worse"


def before_after(evaluations: Iterable[Any]) -> list[dict[str, Any]]:
    """One row per metric: before/after mean, std, n and the difference of the means.

    The ``reward`` row also carries ``bootstrap`` (:func:`paired_test_difference`, or None), and
    ``before_spread``/``after_spread``: whether repeated evaluations of a phase differed (at
    temperature 0 with the cache they are identical, and a std of 0 says nothing)."""
    evaluations = list(evaluations)
    by_phase: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    order: list[str] = []
    for evaluation in evaluations:
        for key, value in (evaluation.metrics or {}).items():
            number = _num(value)
            if number is None:
                continue
            if key not in order:
                order.append(key)
            by_phase.setdefault(evaluation.phase, {}).setdefault(key, []).append(number)
    order = [key for key in order if key == "reward"] + [key for key in order if key != "reward"]
    rows = []
    for key in order:
        before_mean, before_std = mean_std(by_phase["before"].get(key, []))
        after_mean, after_std = mean_std(by_phase["after"].get(key, []))
        diff = None if before_mean is None or after_mean is None else after_mean - before_mean
        rows.append(
            {
                "metric": key,
                "before_mean": before_mean,
                "before_std": before_std,
                "before_n": len(by_phase["before"].get(key, [])),
                "after_mean": after_mean,
                "after_std": after_std,
                "after_n": len(by_phase["after"].get(key, [])),
                "diff": diff,
                "before_spread": bool(before_std),
                "after_spread": bool(after_std),
                "bootstrap": paired_test_difference(evaluations) if key == "reward" else None,
            }
        )
    return rows


def best_of_history(series: dict[str, list[float | None]]) -> float | None:
    """Best validation reward if the run had validation data, else best training reward."""
    for key in ("val_reward", "reward"):
        values = [value for value in series.get(key, []) if value is not None]
        if values:
            return max(values)
    return None


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """``{"optimizer.params.nb_max_examples": 3, ...}`` for config comparisons."""
    if isinstance(config, dict):
        flat: dict[str, Any] = {}
        for key, value in config.items():
            flat.update(flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix.rstrip("."): config}
