"""What the built-in sections of the run page draw from: ``context(run, query) -> dict``.

Each reads only what its section shows, so an event re-reads only what it changed; the
epoch table and the chart name the same function (``history``), read once for both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.db.models import Count, F

from training.execution import summaries
from training.insight import (
    ablation,
    candidate_confidence,
    lineage,
    population_map,
    provenance,
    run_advice,
    spend,
    timing,
)
from training.insight.eval_table import table_context
from training.insight.queue_state import queue_state
from training.insight.trace_reads import trace_summary
from training.models import Run
from training.runs.selectors import with_parent_links

# Candidates the run page lists (all of them up to this; beyond, the best ones and a link
# to the paginated list of every candidate).
LEADERBOARD_SIZE = 50
OPTIMIZER_ERRORS_SHOWN = 10


def nothing(run: Run, query: Mapping[str, Any]) -> dict[str, Any]:
    """A section drawn from the run alone."""
    return {}


def status(run: Run, query: Mapping[str, Any]) -> dict[str, Any]:
    """Why a queued run waits, and what a finished one's outcome means."""
    context: dict[str, Any] = {}
    if run.status == Run.QUEUED:
        context["queue"] = queue_state(run)
    if run.outcome:
        context["happened"] = run_advice.what_happened(run)
    return context


def history(run: Run, query: Mapping[str, Any]) -> dict[str, Any]:
    """Every epoch's logs: the epoch table's rows and the chart's series (with the running
    reward of the epoch under way)."""
    data = summaries.history(list(run.epoch_logs.all()))
    # the epoch under way, batch by batch: the chart's line before its epoch ends
    data["in_epoch"] = run.epoch_so_far if run.status == Run.RUNNING else None
    return {
        "history": data,
        "history_json": json.dumps(data),
        "epoch_rows": [
            {"epoch": epoch, "values": [data["series"][key][index] for key in data["series"]]}
            for index, epoch in enumerate(data["epochs"])
        ],
        "history_keys": list(data["series"]),
    }


def evaluations(run: Run, query: Mapping[str, Any]) -> dict[str, Any]:
    """The test split's figures before and after training."""
    rows = summaries.before_after(run.evaluations.all())
    return {"before_after": rows, "before_after_json": json.dumps(rows)}


def leaderboard(run: Run, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The best candidates (with links to their parents), how many each competition kept or
    dropped, and the optimizer steps that failed and were skipped."""
    candidates = list(
        run.candidates.order_by(F("reward").desc(nulls_last=True), "epoch", "id")[:LEADERBOARD_SIZE]
    )
    with_parent_links(run, candidates)
    candidate_confidence.mark_noise_wins(run, candidates)  # "within noise" beside a lucky win
    statuses = dict(  # order_by(): the model's default ordering would split the groups
        run.candidates.order_by()
        .values("status")
        .annotate(count=Count("id"))
        .values_list("status", "count")
    )
    errors = run.optimizer_errors.all()
    return {
        "candidates": candidates,
        "candidate_count": sum(statuses.values()),
        "status_counts": sorted(statuses.items()),
        "optimizer_errors": list(errors[:OPTIMIZER_ERRORS_SHOWN]),
        "optimizer_error_count": errors.count(),
        "refusal_rows": run_advice.refusal_rows(run),
        "next_steps": run_advice.next_steps(run),
    }


def progress(run: Run, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The epoch and batch bars, and the run's timing."""
    epochs = max(run.epochs, 1)
    done = min(run.current_epoch, epochs)
    batches = run.batches_per_epoch
    batch_done = min(run.current_batch, batches) if batches else 0
    fraction = (done + (batch_done / batches if batches and done < epochs else 0)) / epochs
    if run.status == Run.SUCCEEDED or done >= epochs:
        # The last epoch_end resets the batch counter for an epoch that never comes: every
        # batch is done (the after-evaluation reads like the finished page).
        fraction = 1.0
        batch_done = batches
    return {
        "progress": {
            "epochs": epochs,
            "epochs_done": done,
            "batches": batches,
            "batches_done": batch_done,
            "percent": round(100 * fraction, 1),
            "batch_percent": round(100 * batch_done / batches, 1) if batches else 0,
            "timing": timing.timing(run),
        }
    }


def run_spend(run: Run, query: Mapping[str, Any]) -> dict[str, Any]:
    return spend.run_spend(run)


def population(run: Run, query: Mapping[str, Any]) -> dict[str, Any]:
    """The map; a finished run's asks the page to embed what is not yet (a live one's waits
    for the epoch's competition: each copy of it asked the web process for an embedding)."""
    return population_map.run_map(run, ask=not run.is_active)


def run_lineage(run: Run, query: Mapping[str, Any]) -> dict[str, Any]:
    return lineage.run_lineage(run)


def examples(run: Run, query: Mapping[str, Any]) -> dict[str, Any]:
    """The per-example table, filtered by the page's query (a live update: unfiltered)."""
    return table_context(run, query)


def traces(run: Run, query: Mapping[str, Any]) -> dict[str, Any]:
    return trace_summary(run)


def selection(run: Run, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The "Selection" section: every scored candidate's interval and paired verdicts, the
    charts' points, and where each part of the final prompt came from (with its ablations).
    Its names (``rows``, ``split``) are not the per-example table's: never merged with it."""
    report = candidate_confidence.report(run)
    return {
        **report,
        "points_json": json.dumps(report["points"]),
        "provenance": ablation.annotate(run, provenance.provenance(run)),
        "poll": ablation.POLL_SECONDS,
    }
