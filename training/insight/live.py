"""Server-rendered sections of the run page, and their delivery over Channels.

The run page and the live stream share one renderer: the page includes each section once
(``oob=False``); a change renders the sections it touched with ``hx-swap-oob="true"`` and
sends them to the run's group, where the htmx WebSocket extension swaps them in by id. Each
section is self-contained and idempotent (the epoch table and the chart data carry the whole
history), so a missed or repeated message heals itself with the next one, and a socket that
connects late is sent a full snapshot.

This module alone renders and sends, as the listener of ``training.execution.events``
(registered by ``TrainingConfig.ready``): a writer says what happened to a run (an event
kind), and the sections that name that kind (``sections.registry``), less those the run's
throttle holds back (``sections.throttle``), are rendered and sent. The worker's stored
events land in ``on_stored``, which hands them to the process's
``live_renderer.LiveRenderer`` and returns, so the training loop never waits on a render or
a send; state transitions land in ``on_row_changed``: rendered inline, after the run's
pending renders (``drain``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.template.loader import render_to_string

from training.insight.live_renderer import LiveRenderer
from training.insight.sections import registry
from training.insight.sections.section import Section
from training.insight.sections.throttle import Throttle
from training.models import Run

MESSAGE_TYPE = "run.html"

logger = logging.getLogger(__name__)

#: This process's record of what each run's throttled sections were sent and still owe.
THROTTLE = Throttle()


def contexts(
    run: Run, sections: Iterable[Section], query: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """{name: context} of ``sections`` (only the queries they need; a context function
    that several name is called once)."""
    made: dict[Any, dict[str, Any]] = {}
    for section in sections:
        if section.context not in made:
            made[section.context] = section.context(run, query)
    return {section.name: made[section.context] for section in sections}


def render_parts(
    run: Run, parts: Iterable[str] | None = None, oob: bool = True, **extra: Any
) -> str:
    """The sections called ``parts`` (default: every one), each drawn from its own context."""
    sections = registry.named(parts) if parts is not None else list(registry.SECTIONS)
    made = contexts(run, sections, {})
    return "".join(
        render_to_string(section.template, {**made[section.name], "run": run, "oob": oob, **extra})
        for section in sections
    )


def message(html: str) -> dict[str, Any]:
    return {"type": MESSAGE_TYPE, "html": html, "sent": time.time()}


def broadcast_run(run_id: int, parts: Iterable[str] | None = None) -> None:
    """Re-read a run whose row was just updated by a filtered ``update()``, and broadcast it."""
    broadcast(Run.objects.select_related("program").get(pk=run_id), parts)


def broadcast(run: Run, parts: Iterable[str] | None = None, **extra: Any) -> None:
    """Render ``parts`` (default: every section) and send them to the run's group (sync
    callers: web process, reaper).

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


async def send_parts(group: str, run: Run, parts: Iterable[str], **extra: Any) -> None:
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


def due(run_id: int, kinds: Iterable[str]) -> list[str]:
    """The sections that what ``kinds`` say happened to the run sends now."""
    return [section.name for section in THROTTLE.due(run_id, kinds)]


def on_changed(run: Run, kinds: Iterable[str], **extra: Any) -> None:
    """``events.run_changed``: the sections the change touched, rendered and sent inline."""
    parts = due(run.pk, kinds)
    if parts:
        broadcast(run, parts, **extra)


def on_row_changed(run_id: int, kinds: Iterable[str]) -> None:
    """``events.run_row_changed``: the run re-read, its touched sections sent inline."""
    parts = due(run_id, kinds)
    if parts:
        broadcast_run(run_id, parts)


async def on_stored(group: str, run: Run, kinds: Iterable[str], **extra: Any) -> None:
    """``events.stored``: the touched sections handed to the renderer (returns at once)."""
    parts = due(run.pk, kinds)
    if parts:
        await send_parts(group, run, parts, **extra)


def page_context(run: Run, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run page's context: every section's (but the deferred ones': their frames load
    them), drawn by the same templates as its updates, and the frames each part of the page
    draws them in (``sections.registry.page``)."""
    drawn = [section for section in registry.SECTIONS if not section.deferred]
    context: dict[str, Any] = {"run": run}
    for made in contexts(run, drawn, query if query is not None else {}).values():
        context.update(made)
    context["oob"] = False
    context["sections"] = registry.page()
    return context
