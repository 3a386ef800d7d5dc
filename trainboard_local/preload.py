"""Load the local models when a worker starts, not on a run's first call.

Loading SmolLM2 (llama.cpp, one instance per pool slot) and MiniLM (torch +
sentence-transformers) takes tens of seconds on a small machine; done lazily, a run's first
LM call sits through it with nothing said. ``start_preload(models)`` loads them in a daemon
thread as the worker process starts (so the worker is ready at once), and a run that comes
early just waits on the same load lock. ``state()`` says what is still loading, so a run can
name the phase (``'loading models'``) while it waits. The same thread then registers the
``local`` provider with litellm (its import is seconds more of a first call).

Example:
    ```python
    from trainboard_local import preload

    preload.start_preload(["local/smollm2", "local/minilm"])
    preload.state()  # {"local/smollm2": "loading", "local/minilm": "loading"}
    preload.wait(timeout=120)
    ```
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from trainboard_local import minilm, smollm2
from trainboard_local.errors import LocalModelError

logger = logging.getLogger(__name__)

#: How each local model is loaded (the same functions a first call would run).
LOADERS = {smollm2.MODEL_NAME: smollm2.load, minilm.MODEL_NAME: minilm.get_model}

_lock = threading.Lock()
_states: dict[str, str] = {}
_seconds: dict[str, float] = {}
_thread: threading.Thread | None = None


def loaded(model: str) -> bool:
    """Whether ``model`` is already in memory in this process."""
    if model == smollm2.MODEL_NAME:
        return smollm2.is_loaded()
    if model == minilm.MODEL_NAME:
        return minilm.is_loaded()
    return False


def state() -> dict[str, str]:
    """``{model: "loading" | "ready" | "failed: <why>"}`` for the models asked to preload."""
    with _lock:
        return dict(_states)


def loading() -> bool:
    """Whether a preload is still running (a run should show the phase 'loading models')."""
    return any(value == "loading" for value in state().values())


def seconds() -> dict[str, float]:
    """How long each preloaded model took to load."""
    with _lock:
        return dict(_seconds)


def preload(models: Iterable[str]) -> dict[str, str]:
    """Load ``models`` (the local ones; others are skipped) now, in this thread; returns
    ``state()``. A model that cannot load is reported, never raised: the run that needs it
    gets the usual clear error on its first call."""
    wanted = [m for m in dict.fromkeys(models) if m in LOADERS]
    with _lock:
        for model in wanted:
            _states.setdefault(model, "loading")
    for model in wanted:
        started = time.perf_counter()
        try:
            LOADERS[model]()
            outcome = "ready"
        except (LocalModelError, ImportError, OSError, RuntimeError, ValueError) as error:
            outcome = f"failed: {error}"
            logger.warning("preloading %s failed: %s", model, error)
        with _lock:
            _states[model] = outcome
            _seconds[model] = round(time.perf_counter() - started, 2)
        logger.info("preloaded %s in %.1f s (%s)", model, _seconds[model], outcome)
    if wanted:
        _register_provider()
    return state()


def _register_provider() -> None:
    """Register the ``local`` provider with litellm now (``trainboard_local.register``): its
    import takes seconds of CPU, which a worker's first run would otherwise spend inside its
    own time (what the run page counts and the forecast learns a model's pace from)."""
    from trainboard_local import register

    started = time.perf_counter()
    try:
        register()
    except Exception as error:  # reported, never raised: a run's first call says it again
        logger.warning("registering the local provider failed: %s", error)
        return
    logger.info("registered the local provider in %.1f s", time.perf_counter() - started)


def start_preload(models: Iterable[str]) -> threading.Thread | None:
    """``preload(models)`` in a daemon thread (once per process); None when nothing is local."""
    global _thread
    wanted = [m for m in dict.fromkeys(models) if m in LOADERS]
    if not wanted:
        return None
    with _lock:
        if _thread is not None:
            return _thread
        for model in wanted:
            _states.setdefault(model, "loading")
        _thread = threading.Thread(
            target=preload, args=(wanted,), name="trainboard-preload", daemon=True
        )
    _thread.start()
    return _thread


def wait(timeout: float | None = None) -> bool:
    """Wait for a started preload; True when it finished (or none was started)."""
    thread = _thread
    if thread is None:
        return True
    thread.join(timeout)
    return not thread.is_alive()
