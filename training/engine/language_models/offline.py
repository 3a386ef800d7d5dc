"""The hook through which this package reaches the offline ``local/…`` models.

Why: the offline provider (``training.engine.local``) is built on this package (it registers
its label scorer in ``label_scoring``, takes the per-model semaphore of ``limits``), so this
package never imports it. The layer above both, ``training.engine``'s package, registers a
loader here (:func:`register_loader`); what this package needs from the provider (whether a
model can run, the error it raises, the hint that lists the offline models) comes through what
that loader returns. The loader imports the provider on first need, so litellm still loads with
the first local model or the first failed call, never when the engine is imported.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

#: The provider prefix of offline models: ``local/smollm2``, ``local/minilm``.
PREFIX = "local"


class OfflineProvider(Protocol):
    """What the loader returns (the ``training.engine.local`` package)."""

    LocalModelError: type[Exception]

    def check_available(self, model: str) -> None: ...

    def local_models_hint(self) -> str: ...


_LOCK = threading.Lock()
_loader: Callable[[], OfflineProvider] | None = None


def register_loader(loader: Callable[[], OfflineProvider]) -> None:
    """Reach the offline provider through ``loader`` (it imports and registers the provider,
    then returns it; called on each need, so it must be cheap once it has run)."""
    global _loader
    with _LOCK:
        _loader = loader


def serves(model: str) -> bool:
    """Whether a model string is served by the offline provider (the provider's own rule)."""
    return model.startswith(PREFIX + "/")


def load() -> OfflineProvider:
    """The offline provider, loaded (and registered with litellm) on the first call.

    Raises:
        ImportError: no loader is registered, or the provider cannot be imported.
    """
    loader = _loader
    if loader is None:
        raise ImportError("no offline provider is registered (training.engine registers it)")
    return loader()


__all__ = ["PREFIX", "OfflineProvider", "load", "register_loader", "serves"]
