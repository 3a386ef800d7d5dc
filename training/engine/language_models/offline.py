"""The hook through which the engine reaches the offline ``local/…`` models.

Why: the offline provider (the ``trainboard_local`` package, shipped beside the engine with
the ``local`` extra) is built on this package (it registers its label scorer in
``label_scoring``, takes the per-model semaphore of ``limits``), and the engine is the guide's
API: it never imports the provider. The provider is found in one of two ways:

- an installed distribution names it under the entry-point group :data:`ENTRY_POINT_GROUP`
  (``pip install ".[local]"``: the engine's own wheel does, ``local = "trainboard_local"``);
- whoever runs the engine from a clone registers it (:func:`register_loader`, or
  :func:`register_module` with the module's name): the dashboard at start, the tests'
  ``conftest``, a bench.

What the engine needs from the provider (whether a model can run, the error it raises, the
hint that lists the offline models, its models' info) comes through what the loader returns. The provider is
imported on first need (a local model built, an error's hint) and joins litellm only when the
engine first hands litellm a request (:func:`ensure_registered`): a process that builds a local
model it never calls (a migration's demo program, a page that shows a program) never pays for
litellm's import.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from importlib import metadata
from typing import Protocol

#: The provider prefix of offline models: ``local/smollm2``, ``local/minilm``.
PREFIX = "local"
#: The entry-point group an installed offline provider is named in (its name: :data:`PREFIX`).
ENTRY_POINT_GROUP = "trainboard_engine.offline"


class OfflineProvider(Protocol):
    """What the loader returns (the ``trainboard_local`` package)."""

    LocalModelError: type[Exception]
    #: ``{model: litellm model info}`` of its models (what ``register()`` gives litellm).
    MODEL_INFO: dict[str, dict]

    def check_available(self, model: str) -> None: ...

    def local_models_hint(self) -> str: ...

    def register(self) -> None: ...


_LOCK = threading.Lock()
_loader: Callable[[], OfflineProvider] | None = None
#: Counts the loaders registered: litellm's registration is settled for one of them only.
_generation = 0
#: The generation whose provider litellm has been given (or that has none), if any.
_settled: int | None = None


def register_loader(loader: Callable[[], OfflineProvider]) -> None:
    """Reach the offline provider through ``loader`` (it imports the provider and returns it,
    cheaply once it has run; the engine calls the provider's ``register()`` itself)."""
    global _loader, _generation
    with _LOCK:
        _loader = loader
        _generation += 1


def register_module(name: str) -> None:
    """Reach the offline provider by importing the module ``name`` on first need."""
    register_loader(lambda: importlib.import_module(name))


def serves(model: str) -> bool:
    """Whether a model string is served by the offline provider (the provider's own rule)."""
    return model.startswith(PREFIX + "/")


def _installed_loader() -> Callable[[], OfflineProvider] | None:
    """The loader of the provider an installed distribution names, if one does."""
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == PREFIX:
            return entry.load
    return None


def find() -> OfflineProvider:
    """The offline provider, imported (not yet added to litellm): enough to ask whether a
    model can run here and for the list of offline models.

    Raises:
        ImportError: no provider is registered or installed, or it cannot be imported.
    """
    global _loader
    loader = _loader
    if loader is None:
        loader = _installed_loader()
        if loader is None:
            raise ImportError(
                "no offline provider is installed (pip install 'trainboard-engine[local]') "
                "or registered (training.engine.language_models.offline.register_module)"
            )
        with _LOCK:
            _loader = loader
    return loader()


def model_info(model: str) -> dict | None:
    """What the offline provider says of ``model`` (its litellm model info: a chat model's
    ``supports_response_schema``, …), read without importing litellm: a page that forecasts
    a local model's prompts would otherwise pay litellm's import (seconds of CPU) to learn
    what the provider states itself. None for a model it does not serve, or no provider."""
    if not serves(model):
        return None
    try:
        return getattr(find(), "MODEL_INFO", {}).get(model)
    except ImportError:
        return None


def load() -> OfflineProvider:
    """The offline provider, added to litellm (its ``register()``: cheap after the first).

    Raises:
        ImportError: no provider is registered or installed, or it cannot be imported.
    """
    provider = find()
    provider.register()
    return provider


def ensure_registered() -> None:
    """Add the offline provider to litellm if one is registered or installed; a no-op once
    settled. The engine calls it each time it reaches litellm, so a ``local/…`` request finds
    its provider however the model was built, and litellm is never imported for it earlier.

    Raises:
        Exception: what the provider's ``register()`` raised (not settled: the next call tries
            again); no provider at all is no error.
    """
    global _settled
    generation = _generation
    if _settled == generation:
        return
    try:
        provider = find()
    except ImportError:  # none here: litellm answers local/… as an unknown provider
        provider = None
    if provider is not None:
        provider.register()
    with _LOCK:
        if _generation == generation:  # no loader came meanwhile: it would need its own turn
            _settled = generation


__all__ = [
    "ENTRY_POINT_GROUP",
    "PREFIX",
    "OfflineProvider",
    "ensure_registered",
    "find",
    "load",
    "model_info",
    "register_loader",
    "register_module",
    "serves",
]
