"""The training app's tunables: a Django setting of the same name wins, then the environment.

``project/settings.py`` does not define these (they belong to this app), so each is read here:
``settings.NAME`` when a settings module or a test sets it, else the ``NAME`` environment
variable, else the default. A malformed environment value is an error naming the variable,
not a silent fallback.
"""

from __future__ import annotations

import os

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from training.engine import tracing

DEFAULTS = {
    # How often a running run's worker writes its heartbeat (seconds).
    "TRAINBOARD_HEARTBEAT_SECONDS": 5.0,
    # A running run whose heartbeat is older than this is "failed: worker lost" (seconds).
    "TRAINBOARD_HEARTBEAT_STALE_SECONDS": 30.0,
    # A run from code (``callbacks.RemoteMonitor``) that sent nothing for this long is
    # failed: the code that ran it has stopped (seconds).
    "TRAINBOARD_CODE_RUN_QUIET_SECONDS": 600.0,
    # A run lost to a dead worker or host is resumed from its checkpoint this many times
    # without a person (0: never; then Resume is pressed by hand).
    "TRAINBOARD_AUTO_RESUMES": 2,
    # How many test examples the trained program answers for the run page (0: none).
    "TRAINBOARD_SAMPLE_PREDICTIONS": 5,
    # LM call traces a run stores at most (later calls are only counted; 0: none stored).
    "TRAINBOARD_TRACE_MAX_CALLS": tracing.DEFAULT_MAX_CALLS,
    # Characters kept of each traced text (a message, a response, an error).
    "TRAINBOARD_TRACE_MAX_CHARS": tracing.DEFAULT_MAX_CHARS,
    # Worker processes that execute runs (``make run`` starts this many): the forecast's
    # queue (how many runs execute at once, how long a new one waits).
    "TRAINBOARD_WORKER_CONCURRENCY": 2,
}


#: On/off tunables (same precedence; the environment says 1/0, true/false, yes/no, on/off).
FLAGS = {
    # Saved endpoints may be loopback or private addresses (a model server on this machine or
    # the local network); link-local and metadata addresses never are.
    "TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS": True,
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def flag(name: str) -> bool:
    """An on/off tunable: the Django setting, else the environment, else its default."""
    value = getattr(settings, name, None)
    if value is not None:
        return value if isinstance(value, bool) else str(value).strip().lower() in _TRUE
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return FLAGS[name]
    if raw not in _TRUE | _FALSE:
        raise ImproperlyConfigured(
            f"environment variable {name}={raw!r} is not on or off (1/0, true/false, yes/no)"
        )
    return raw in _TRUE


def get(name: str) -> float | int:
    default = DEFAULTS[name]
    kind = type(default)
    value = getattr(settings, name, None)
    if value is not None:
        return kind(value)
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(float(raw)) if kind is float else kind(raw)
    except ValueError:
        raise ImproperlyConfigured(
            f"environment variable {name}={raw!r} is not a {kind.__name__} (default {default})"
        ) from None
    if value < 0:
        raise ImproperlyConfigured(f"environment variable {name}={raw!r} must not be negative")
    return value
