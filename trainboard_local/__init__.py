"""Offline local models as the litellm custom provider `local`.

``register()`` adds the provider to litellm (idempotently); importing the package loads
neither litellm nor llama.cpp, torch or the weights (they load on the first real call). After
that

    await litellm.acompletion(model="local/smollm2", messages=..., response_format=...)
    await litellm.aembedding(model="local/minilm", input=[...])

work like any remote model. `check_available(model)` tells, without loading anything, whether
a local model can run here (for fail-fast construction and the Settings page).

A package beside the engine, built on it (its label scorer, the per-model semaphore): the
engine never imports it. The engine finds it through ``language_models.offline``: installed,
by the entry point the wheel declares (``pyproject.toml``); from a clone, by a registration
(the dashboard's ``TrainingConfig.ready``, the tests' ``conftest``); either way the engine
calls ``register()`` when it first hands litellm a request or scores a local model's labels,
not when it builds a local model.
"""

from __future__ import annotations

import os
import threading

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from trainboard_local import minilm, smollm2  # noqa: E402
from trainboard_local.errors import (  # noqa: E402
    INSTALL_COMMAND,
    LOCAL_MODELS,
    LocalModelError,
    local_models_hint,
    unknown_model,
)
from training.engine.language_models import offline  # noqa: E402

#: The litellm provider prefix these models answer to (``local/smollm2``).
PROVIDER = offline.PREFIX

__all__ = [
    "INSTALL_COMMAND",
    "LOCAL_MODELS",
    "PROVIDER",
    "LocalModelError",
    "LocalProvider",
    "check_available",
    "is_local_model",
    "local_models_hint",
    "register",
]

_FREE = {
    "litellm_provider": PROVIDER,
    "input_cost_per_token": 0.0,
    "output_cost_per_token": 0.0,
    "cache_creation_input_token_cost": 0.0,
    "cache_read_input_token_cost": 0.0,
}

#: What litellm's model map should know: free, and smollm2 honours response_format json_schema
#: (so `litellm.supports_response_schema("local/smollm2")` is True).
MODEL_INFO = {
    smollm2.MODEL_NAME: {
        **_FREE,
        "mode": "chat",
        "max_input_tokens": smollm2.DEFAULT_N_CTX,
        "max_output_tokens": smollm2.DEFAULT_N_CTX,
        "max_tokens": smollm2.DEFAULT_N_CTX,
        "supports_response_schema": True,
        "supports_system_messages": True,
    },
    minilm.MODEL_NAME: {
        **_FREE,
        "mode": "embedding",
        "max_input_tokens": 256,
        "output_vector_size": minilm.DIMENSIONS,
    },
}

_REGISTER_LOCK = threading.Lock()
_registered = False


def register() -> None:
    """Add the `local` provider to litellm and its label scorer to the engine once; safe to
    call any number of times (cheap after the first).

    litellm (seconds of CPU to import) and the provider load here, not when the package is
    imported: a process that only preloads weights or asks ``is_local_model`` (the web
    server, the reaper, ``manage.py`` commands) never pays for them.
    """
    global _registered
    if _registered:
        return
    with _REGISTER_LOCK:
        if _registered:
            return
        import litellm

        from trainboard_local.provider import LocalProvider, score_labels
        from training.engine.language_models.label_scoring import register_scorer

        if not any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
            litellm.custom_provider_map = [
                *litellm.custom_provider_map,
                {"provider": PROVIDER, "custom_handler": LocalProvider()},
            ]
        if smollm2.MODEL_NAME not in litellm.model_cost:
            litellm.register_model(MODEL_INFO)
        register_scorer(PROVIDER, score_labels)
        _registered = True


def __getattr__(name: str):
    """``LocalProvider`` and ``score_labels`` from the provider, imported on first use."""
    if name in ("LocalProvider", "score_labels"):
        from trainboard_local import provider

        return getattr(provider, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_local_model(model: str) -> bool:
    """Whether a model string is served by this provider."""
    return model.startswith(PROVIDER + "/")


def check_available(model: str) -> None:
    """Raise LocalModelError (what is missing + the install command) unless `model` can run.

    Loads nothing; imports the runtime and finds the weights.
    """
    if model == smollm2.MODEL_NAME:
        smollm2.check_available()
    elif model == minilm.MODEL_NAME:
        minilm.check_available()
    else:
        raise unknown_model(model, "local")


# The engine reaches this provider through its hook once the package is imported (a lambda:
# litellm still loads only when ``register()`` first runs).
offline.register_module(__name__)
