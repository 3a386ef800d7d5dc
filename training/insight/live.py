"""Server-rendered fragments of the run page, and their delivery over Channels.

The run page and the live stream share one renderer: the page includes each fragment once
(``oob=False``); the worker renders the fragments an event changed with
``hx-swap-oob="true"`` and sends them to the run's group, where the htmx WebSocket extension
swaps them in by id. Each fragment is self-contained and idempotent (the epoch table and the
chart data carry the whole history), so a missed or repeated message heals itself with the
next one, and a socket that connects late is sent a full snapshot.

This module alone renders and sends, as the listener of ``training.execution.events``
(registered by ``TrainingConfig.ready``): the worker's persistence code stores an event and
emits it (``events.stored`` with ``EVENT_PARTS``), which lands in ``send_parts``: that hands
the change to the process's ``live_renderer.LiveRenderer`` and returns, so the training loop
never waits on a render or a send. State transitions emit ``events.run_row_changed``, which
lands in ``broadcast_run``: rendered inline, after the run's pending renders (``drain``).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db.models import Count, F
from django.template.loader import render_to_string

from training.execution import summaries
from training.execution.events import ALL_PARTS
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
from training.insight.live_renderer import LiveRenderer
from training.insight.queue_state import queue_state
from training.insight.trace_reads import trace_summary
from training.models import Candidate, Run
from training.runs.selectors import with_parent_links

TEMPLATES = {part: f"training/partials/run_{part}.html" for part in ALL_PARTS}
# Candidates the run page lists (all of them up to this; beyond, the best ones and a link
# to the paginated list of every candidate).
LEADERBOARD_SIZE = 50
OPTIMIZER_ERRORS_SHOWN = 10
MESSAGE_TYPE = "run.html"

logger = logging.getLogger(__name__)


def part_context(
    run: Run, parts: tuple[str, ...] | list[str], live: bool = True, query: Any = None
) -> dict[str, Any]:
    """What the fragments in ``parts`` need (only the queries they need); ``live``: for an
    update of an open page (False: for the page itself); ``query``: the page's query string
    (the per-example table's filters; a live update shows the table unfiltered)."""
    context: dict[str, Any] = {"run": run}
    if "epochs" in parts or "chart" in parts:
        logs = list(run.epoch_logs.all())
        data = summaries.history(logs)
        context["history"] = data
        context["history_json"] = json.dumps(data)
        context["epoch_rows"] = [
            {"epoch": epoch, "values": [data["series"][key][index] for key in data["series"]]}
            for index, epoch in enumerate(data["epochs"])
        ]
        context["history_keys"] = list(data["series"])
    if "leaderboard" in parts:
        context.update(leaderboard(run))
    if "evaluations" in parts:
        rows = summaries.before_after(run.evaluations.all())
        context["before_after"] = rows
        context["before_after_json"] = json.dumps(rows)
    if "progress" in parts:
        context["progress"] = progress(run)
    if "spend" in parts:
        context.update(spend.run_spend(run))
    if "population" in parts:
        context.update(population_map.run_map(run, ask=not run.is_active))
    if "lineage" in parts:
        context.update(lineage.run_lineage(run))
    if "status" in parts and run.status == Run.QUEUED:
        context["queue"] = queue_state(run)
    if "status" in parts and run.outcome:
        context["happened"] = run_advice.what_happened(run)
    if "examples" in parts:
        context.update(table_context(run, query if query is not None else {}))
    if "traces" in parts:
        context.update(trace_summary(run))
    return context


def selection_context(run: Run) -> dict[str, Any]:
    """The "Selection" section (``run_candidate_confidence.html``): every scored candidate's
    interval and paired verdicts, the charts' points, and where each part of the final
    prompt came from (with its ablations)."""
    report = candidate_confidence.report(run)
    return {
        **report,
        "points_json": json.dumps(report["points"]),
        "provenance": ablation.annotate(run, provenance.provenance(run)),
        "poll": ablation.POLL_SECONDS,
    }


#: Parts drawn from a context of their own: their names would clash with the other parts'
#: (the Selection section's ``rows`` and ``split`` are not the per-example table's). The page
#: itself loads the Selection section once it is up (its bootstraps take a moment on a large
#: run: ``selection_section.html``); an update carries it whole.
OWN_CONTEXT = {"candidate_confidence": selection_context}


def leaderboard(run: Run) -> dict[str, Any]:
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


def progress(run: Run) -> dict[str, Any]:
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
        "epochs": epochs,
        "epochs_done": done,
        "batches": batches,
        "batches_done": batch_done,
        "percent": round(100 * fraction, 1),
        "batch_percent": round(100 * batch_done / batches, 1) if batches else 0,
        "timing": timing.timing(run),
    }


def render_parts(
    run: Run, parts: tuple[str, ...] | list[str] = ALL_PARTS, oob: bool = True, **extra: Any
) -> str:
    context = part_context(run, parts)
    context.update(oob=oob, **extra)
    return "".join(
        render_to_string(
            TEMPLATES[part],
            {"run": run, "oob": oob, **OWN_CONTEXT[part](run)} if part in OWN_CONTEXT else context,
        )
        for part in parts
    )


def message(html: str) -> dict[str, Any]:
    return {"type": MESSAGE_TYPE, "html": html, "sent": time.time()}


def broadcast_run(run_id: int, parts: tuple[str, ...] | list[str] = ALL_PARTS) -> None:
    """Re-read a run whose row was just updated by a filtered ``update()``, and broadcast it."""
    broadcast(Run.objects.select_related("program").get(pk=run_id), parts)


def broadcast(run: Run, parts: tuple[str, ...] | list[str] = ALL_PARTS, **extra: Any) -> None:
    """Render ``parts`` and send them to the run's group (sync callers: web process, reaper).

    A channel layer error (Redis briefly away) is logged, never raised: the database is the
    source of truth, and the page re-renders from it (next message, reconnect or reload).
    What this process's renderer still owes the run is sent first (never after this).
    """
    RENDERER.drain(run.pk)
    html = render_parts(run, parts, oob=True, **extra)
    try:
        async_to_sync(get_channel_layer().group_send)(run.group_name, message(html))
    except Exception as exc:
        _send_failed(run.group_name, exc)


async def send_parts(
    group: str, run: Run, parts: tuple[str, ...] | list[str], **extra: Any
) -> None:
    """Have ``parts`` of a run the worker just stored rendered and sent (async callers: the
    training loop), by the renderer's thread: this returns at once.

    ``extra`` reaches the templates (``emitted_at``: when the engine emitted the event,
    which the epochs fragment carries for the stream-latency bench).
    """
    if not renders_off_thread():
        await send(group, await sync_to_async(render_parts)(run, parts, **extra))
        return
    RENDERER.submit(group, run, parts, **extra)


def renders_off_thread() -> bool:
    """Whether the renderer's thread may read while the training loop writes: not on an
    in-memory SQLite database (the tests'), whose shared cache locks whole tables: a read
    there fails the worker's write at once ("database table is locked") instead of waiting.
    Then the fragments are rendered as before, in the ORM thread, between the writes.
    A file SQLite database (WAL), PostgreSQL: yes."""
    from django.db import connection

    return not (connection.vendor == "sqlite" and connection.is_in_memory_db())


async def send(group: str, html: str) -> None:
    """Send already-rendered fragments (async callers: the worker's training loop).

    Like ``broadcast``, a failed send is logged and the run goes on.
    """
    try:
        await get_channel_layer().group_send(group, message(html))
    except Exception as exc:
        _send_failed(group, exc)


#: This process's renderer of the worker's changes (its thread starts with the first one).
RENDERER = LiveRenderer(render_parts, send)


def _send_failed(group: str, exc: Exception) -> None:
    logger.warning(
        "live update to %s not sent (%s: %s); the page catches up from the database",
        group,
        type(exc).__name__,
        exc,
    )


def page_context(run: Run, query: Any = None) -> dict[str, Any]:
    """The run page's context: every fragment, drawn by the same partials as its updates."""
    context = part_context(run, ALL_PARTS, live=False, query=query)
    context["oob"] = False
    context["candidate_model"] = Candidate
    return context
