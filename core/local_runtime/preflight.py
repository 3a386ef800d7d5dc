"""Up-front reachability checks for DATABASE_URL and REDIS_URL.

Each returns None when reachable, else ONE line naming the variable and the address, so
``make run`` can stop with that line instead of a traceback. No Django setup needed.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from project.redis_config import describe, socket_path

TIMEOUT = 3


def check_database_url(url: str | None, default_sqlite: Path) -> str | None:
    if not url:
        return _check_sqlite_dir(default_sqlite.parent, "DATABASE_URL (default SQLite)")
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[0]
    if scheme in ("postgres", "postgresql", "pgsql"):
        address = f"{parts.hostname or 'localhost'}:{parts.port or 5432}"
        dbname = parts.path.lstrip("/") or "postgres"
        try:
            import psycopg

            with psycopg.connect(url.replace("postgis://", "postgres://"), connect_timeout=TIMEOUT):
                pass
        except Exception as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return f"DATABASE_URL: cannot connect to PostgreSQL at {address} (database {dbname!r}): {reason}"
        return None
    if scheme in ("sqlite", "spatialite"):
        path = parts.path
        if path in ("", "/:memory:", ":memory:"):
            return None
        return _check_sqlite_dir(Path(path).parent, "DATABASE_URL")
    return None  # other engines: Django reports problems itself


def _check_sqlite_dir(directory: Path, name: str) -> str | None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{name}: cannot create the SQLite directory {directory}: {exc.strerror}"
    if not os.access(directory, os.W_OK):
        return f"{name}: the SQLite directory {directory} is not writable"
    return None


def check_redis_url(url: str) -> str | None:
    import redis

    try:
        client = redis.Redis.from_url(
            url.replace("redis+socket://", "unix://"),
            socket_timeout=TIMEOUT,
            socket_connect_timeout=TIMEOUT,
        )
        client.ping()
        client.close()
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        kind = "socket" if socket_path(url) else "server"
        return f"REDIS_URL: cannot reach the Redis {kind} at {describe(url)}: {reason}"
    return None
