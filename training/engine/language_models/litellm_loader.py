"""Loading litellm (once, quietly) and the offline ``local`` provider.

The provider is reached through ``offline.py``'s hook, never imported from here: it is built on
this package.
"""

from __future__ import annotations

import threading

from training.engine.language_models import offline
from training.engine.language_models.errors import LanguageModelConfigError

_LITELLM_LOCK = threading.Lock()
_LITELLM_READY = False


def get_litellm():
    """litellm, imported once by the engine with its debug banners off, and the offline
    provider added to it (``offline.ensure_registered``: a flag's test once done).

    litellm prints a "Give Feedback / Get Help" banner (and a provider list) on every error
    unless ``suppress_debug_info`` is set; in a training log that is noise on each failure.

    Returns:
        The ``litellm`` module.
    """
    global _LITELLM_READY
    import litellm

    if not _LITELLM_READY:
        with _LITELLM_LOCK:
            litellm.suppress_debug_info = True
            _LITELLM_READY = True
    offline.ensure_registered()
    return litellm


def check_local_model(where: str, model: str) -> None:
    """Check that the offline ``model`` can run here (loads neither litellm nor weights: it
    joins litellm with the first request, :func:`get_litellm`).

    Fails at construction — not on the first call in the middle of a run — with what is missing
    and the command that installs it, or the list of local models for an unknown name.

    Args:
        where: names the caller in the error, e.g. ``"LanguageModel('local/smollm2')"``.
        model: the ``local/…`` model string.

    Raises:
        LanguageModelConfigError: the model is unknown or cannot run on this machine.
    """
    try:
        local = offline.find()
    except ImportError as exc:
        raise LanguageModelConfigError(
            f"{where}: the local provider cannot be imported: {exc}"
        ) from exc
    try:
        local.check_available(model)
    except local.LocalModelError as exc:
        raise LanguageModelConfigError(f"{where}: {exc}") from exc
