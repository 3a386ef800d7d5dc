"""The population map's one write: embedding a run's candidates when its map is first opened.

Runs whose optimizer embeds nothing (RandomFewShot, OMEGA with ``algorithm="ga"``) get their
map this way; the vectors are stored on the candidates, so it happens once. The page asks for
it with an htmx POST when the map fragment says candidates are waiting
(``population_map.needs_embedding``); the answer is the fragment again.
"""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_POST

from training import selectors
from training.services import population_map


@require_POST
def run_population_embed(request, pk: int):
    run = selectors.owned_run(request.user, pk)
    error = ""
    try:
        population_map.embed_missing(run)
    except population_map.MapUnavailable as exc:
        error = str(exc)
    context = {"run": run, "oob": False, **population_map.run_map(run)}
    if error:
        context.update(map_error=error, needs_embedding=False)
    return render(request, "training/partials/run_population.html", context)
