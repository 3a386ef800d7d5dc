"""Opt-in response cache for deterministic LM calls (temperature 0).

Why our own keyed cache rather than ``litellm.cache``: litellm's cache is one process-global
setting shared by every call, so it cannot be switched on for one LanguageModel and off for
another (the dashboard runs several programs in one worker); its hit detection and key
derivation change between litellm releases; and we must see hits to count them in usage.
Here the key is a SHA-256 of the canonical request (model, api_base, messages, schema,
temperature, max_tokens), the value the raw completion text and its token counts. Backends:
in-memory (tests), disk through ``diskcache`` (default), or Redis (``redis://…``). Values are
JSON, never pickled objects.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import OrderedDict
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = os.environ.get(
    "TRAINBOARD_LM_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "trainboard", "lm")
)


def request_key(payload: dict[str, Any]) -> str:
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """Base: ``get(key) -> dict | None`` and ``set(key, value: dict)``."""

    spec: str = "memory"

    def get(self, key: str) -> dict | None:  # pragma: no cover - interface
        raise NotImplementedError

    def set(self, key: str, value: dict) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class MemoryCache(ResponseCache):
    """An in-process LRU cache (tests, one-off scripts): gone when the process ends.

    Args:
        max_entries: how many responses it keeps; the least recently used goes first.
    """

    spec = "memory"

    def __init__(self, max_entries: int = 100_000):
        self._data: OrderedDict[str, dict] = OrderedDict()
        self._max = max_entries

    def get(self, key: str) -> dict | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def set(self, key: str, value: dict) -> None:
        self._data[key] = value
        if len(self._data) > self._max:
            self._data.popitem(last=False)


class DiskCache(ResponseCache):
    """Responses kept on disk through ``diskcache`` (the default), shared by the processes
    of one machine and kept across runs.

    Args:
        directory: where the cache lives (made when missing); ``TRAINBOARD_LM_CACHE_DIR``
            or ``~/.cache/trainboard/lm`` by default.
    """

    def __init__(self, directory: str = DEFAULT_CACHE_DIR):
        import diskcache

        self.spec = f"disk:{directory}"
        os.makedirs(directory, exist_ok=True)
        self._cache = diskcache.Cache(directory)

    def get(self, key: str) -> dict | None:
        raw = self._cache.get(key)
        return json.loads(raw) if isinstance(raw, str) else None

    def set(self, key: str, value: dict) -> None:
        self._cache.set(key, json.dumps(value))


class RedisCache(ResponseCache):
    """Keys ``<prefix><sha256>``, JSON values, a TTL (default 30 days).

    A cache is an optimisation: when Redis is down or refuses a command, the call goes to the
    LM as if the entry were missing (logged once per outage), never a failed prediction.

    Args:
        url: the Redis server (``redis://host:6379/1``).
        prefix: put before every key, so one Redis can serve other things too.
        ttl: seconds an entry lives (None: until Redis evicts it).
        socket_timeout: seconds to connect or answer before the cache counts as down.
    """

    def __init__(
        self,
        url: str,
        prefix: str = "trainboard:lm:",
        ttl: int | None = 30 * 86400,
        socket_timeout: float = 5.0,
    ):
        import redis

        self.spec = url
        self._client = redis.Redis.from_url(
            url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout
        )
        self._errors = (redis.RedisError, OSError)
        self.prefix = prefix
        self._ttl = ttl
        self._down = False

    def _failed(self, action: str, exc: BaseException) -> None:
        if not self._down:
            logger.warning(
                "LM response cache %s: %s failed (%s: %s); calling the LM without the cache",
                self.spec,
                action,
                type(exc).__name__,
                exc,
            )
        self._down = True

    def get(self, key: str) -> dict | None:
        try:
            raw = self._client.get(self.prefix + key)
        except self._errors as exc:
            self._failed("get", exc)
            return None
        self._down = False
        return json.loads(raw) if raw else None

    def set(self, key: str, value: dict) -> None:
        try:
            self._client.set(self.prefix + key, json.dumps(value), ex=self._ttl)
        except self._errors as exc:
            self._failed("set", exc)


_SHARED: dict[str, ResponseCache] = {}


def make_cache(spec: Any) -> ResponseCache | None:
    """``False/None`` → no cache; ``True``/``"disk"`` → disk at the default dir; ``"memory"``;
    ``"disk:/path"`` or a directory path; ``"redis://…"``; or a ResponseCache instance."""
    if spec is None or spec is False:
        return None
    if isinstance(spec, ResponseCache):
        return spec
    if spec is True:
        spec = "disk"
    if not isinstance(spec, str):
        raise ValueError(
            f"cache must be True/False, 'memory', 'disk[:dir]', 'redis://…', got {spec!r}"
        )
    if spec in _SHARED:
        return _SHARED[spec]
    if spec == "memory":
        cache: ResponseCache = MemoryCache()
    elif spec == "disk":
        cache = DiskCache()
    elif spec.startswith("disk:"):
        cache = DiskCache(spec[5:])
    elif spec.startswith(("redis://", "rediss://", "unix://")):
        cache = RedisCache(spec)
    else:
        cache = DiskCache(spec)
    _SHARED[spec] = cache
    return cache


def cache_spec(cache: ResponseCache | None) -> Any:
    """JSON form of a cache setting, for get_config."""
    return cache.spec if cache is not None else False
