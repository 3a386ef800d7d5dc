"""Comparing runs: chart series per run, a metrics table, before/after rows, config diff."""

from __future__ import annotations

import json
from typing import Any

from training.execution import summaries
from training.models import Run
from training.runs import selectors


def compare(runs: list[Run]) -> dict[str, Any]:
    """The compare page's data for ``runs`` (see ``selectors.runs_by_ids``, which prefetches
    what is read here): chart series, the metrics table and the config diff."""
    chart_runs = []
    table = []
    for run in runs:
        history = summaries.history(selectors.epoch_logs(run))
        rows = summaries.before_after(selectors.evaluations(run))
        chart_runs.append(
            {
                "id": run.pk,
                "label": f"#{run.pk} {run.program.name}",
                "history": history,
                "before_after": rows,
            }
        )
        table.append(
            {
                "run": run,
                "before_after": rows,
                "last": {
                    key: values[-1] if values else None for key, values in history["series"].items()
                },
            }
        )
    metric_names: list[str] = []
    for entry in table:
        for row in entry["before_after"]:
            if row["metric"] not in metric_names:
                metric_names.append(row["metric"])
    metrics_table = []
    for name in metric_names:
        cells = []
        for entry in table:
            row = next((r for r in entry["before_after"] if r["metric"] == name), None)
            cells.append(row)
        metrics_table.append({"metric": name, "cells": cells})
    rows = config_diff(runs)
    return {
        "chart": {"runs": chart_runs},
        "metrics_table": metrics_table,
        "config_rows": rows,
        "headings": headings(runs, rows),
    }


#: Settings a column's heading names at most, besides the optimizer.
HEADING_SETTINGS = 3


def headings(runs: list[Run], rows: list[dict[str, Any]]) -> list[str]:
    """Each run's column heading beyond its number and program: its optimizer and the first
    settings, by name, in which the runs differ ("CalibratedLabels · epochs 2 · seed 3"), so
    columns of runs of one program can be told apart."""
    # by name: a JSON column's key order is the database's (PostgreSQL's jsonb sorts by length)
    differing = sorted(
        (row for row in rows if row["differs"] and not row["key"].startswith("optimizer")),
        key=lambda row: row["key"],
    )
    found = []
    for index, run in enumerate(runs):
        parts = [run.optimizer_name]
        parts += [f"{row['key']} {row['values'][index]}" for row in differing[:HEADING_SETTINGS]]
        found.append(" · ".join(parts))
    return found


#: How an unset value reads in the configuration table: null, "", [] and {} are one "unset".
UNSET = "—"


def _shown(value: Any) -> str:
    """A configuration value as the table shows it; every kind of empty is :data:`UNSET`, so
    a run that left a setting null and one that left it empty do not differ."""
    if value is None or value == "" or value == [] or value == {}:
        return UNSET
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def config_diff(runs: list[Run]) -> list[dict[str, Any]]:
    """Every configuration key (flattened) with each run's value; ``differs`` when they do.
    The program, its version the run trained, and the dataset come first."""
    flat = [
        {
            "program": run.program.name,
            "program version": f"version {_version(run)}",
            "dataset": run.dataset.name,
            **summaries.flatten(run.config),
        }
        for run in runs
    ]
    keys: list[str] = []
    for item in flat:
        for key in item:
            if key not in keys:
                keys.append(key)
    rows = []
    for key in keys:
        shown = [_shown(item.get(key)) for item in flat]
        rows.append({"key": key, "values": shown, "differs": len(set(shown)) > 1})
    rows.sort(key=lambda row: (not row["differs"], keys.index(row["key"])))
    return rows


def _version(run: Run) -> int:
    """The program version a run trained (runs from before versions trained version 1)."""
    return run.program_version.number if run.program_version_id else 1
