"""A run that starts while its worker still loads the local models says so.

The worker loads ``local/…`` models once as its process starts (``trainboard_local.preload``,
started from ``project/celery.py``), in a background thread. A run claimed before
that load is done would sit in "starting" with nothing said while its first LM call waits on
the load lock; instead it names the phase ``"loading models"`` (the run page's status and
progress show it, live) and waits here, still answering Cancel, until the models it uses are
loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from trainboard_local import preload
from training import optimizer_registry
from training.execution import events, run_state

#: The phase a run shows while its worker loads the local models it needs.
LOADING_PHASE = "loading models"
#: How often the wait looks for the run's Cancel (seconds).
POLL_SECONDS = 1.0


def models_of(config: dict[str, Any]) -> list[str]:
    """Every model string a run's configuration uses (program, optimizer, reward)."""
    params = (config.get("optimizer") or {}).get("params") or {}
    reward = config.get("reward") or {}
    models = [config.get("model"), params.get("language_model"), params.get("embedding_model")]
    name = (config.get("optimizer") or {}).get("name")
    if (
        not params.get("embedding_model")
        and optimizer_registry.offered(name)
        and optimizer_registry.get(name).uses_embedding_model(params)
    ):  # the dashboard's default embedding model (run_config.build_optimizer)
        models.append(settings.TRAINBOARD_EMBEDDING_MODEL)
    models += [reward.get("language_model"), reward.get("embedding_model")]
    return [str(model) for model in models if model]


def still_loading(models: Iterable[str]) -> list[str]:
    """Those of ``models`` this worker process is still loading."""
    states = preload.state()
    return [model for model in dict.fromkeys(models) if states.get(model) == "loading"]


async def wait_for_models(
    run: Any, group: str, models: Iterable[str], stop: Callable[[], Awaitable[bool]]
) -> bool:
    """While the worker loads any of ``models``: phase "loading models", wait. Returns False
    when ``stop()`` (the run's Cancel, a superseded attempt) said so meanwhile."""
    models = list(models)
    if not still_loading(models):
        return True
    labelled = await sync_to_async(run_state.set_phase)(run.pk, run.attempt, LOADING_PHASE)
    await events.stored(group, labelled, events.PHASE)
    while still_loading(models):
        if await stop():
            return False
        await asyncio.to_thread(preload.wait, POLL_SECONDS)
    return True
