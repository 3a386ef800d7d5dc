"""The population map's one write: embedding a run's candidates when its map is opened.

Runs whose optimizer embeds nothing (RandomFewShot, OMEGA with ``algorithm="ga"``) get their
map this way; the vectors are stored on the candidates, so each is embedded once. The page
asks with an htmx POST when the map fragment says candidates are waiting
(``population_map.run_map``: when the page is opened, and when the run ends); the answer is
the fragment again.

Embedding can take seconds (the first one loads the model), so it runs on a thread of its
own: Django runs sync views one at a time on one thread under ASGI, and an embedding there
held up every other page, the Cancel button and ``/healthz`` behind it. One embedding per
run at a time: a second request for the same run answers with the map as it is.
"""

from __future__ import annotations

import threading

from asgiref.sync import sync_to_async
from django.db import connection
from django.shortcuts import render
from django.views.decorators.http import require_POST

from training.insight import population_map
from training.runs import selectors

#: When another request is embedding a run's candidates, the page asks again after this.
EMBED_BUSY_RETRY = "2s"
_embedding_runs: set[int] = set()
_embedding_lock = threading.Lock()


def _embed_once(run) -> str | None:
    """Embed the run's missing candidates unless that is already under way (None); the error
    the map shows ("" if none)."""
    with _embedding_lock:
        if run.pk in _embedding_runs:
            return None
        _embedding_runs.add(run.pk)
    try:
        population_map.embed_missing(run)
    except population_map.MapUnavailable as exc:
        return str(exc)
    finally:
        with _embedding_lock:
            _embedding_runs.discard(run.pk)
        connection.close()  # this pool thread's own connection: no request closes it
    return ""


def _fragment(request, run, error: str | None):
    context = {"run": run, "oob": False, **population_map.run_map(run, ask=not run.is_active)}
    if error is None:  # another request is embedding them: ask again in a moment, not at once
        context["embed_delay"] = EMBED_BUSY_RETRY
    elif error:
        context.update(map_error=error, needs_embedding=False)
    return render(request, "training/partials/run_population.html", context)


@require_POST
async def run_population_embed(request, pk: int):
    user = await request.auser()
    run = await sync_to_async(selectors.owned_run)(user, pk)
    error = await sync_to_async(_embed_once, thread_sensitive=False)(run)
    return await sync_to_async(_fragment)(request, run, error)
