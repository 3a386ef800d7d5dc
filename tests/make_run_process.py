"""Start ``scripts/run.py`` (what ``make run`` runs) the way a user's shell would.

Shared by the make-run tests of tests/web: ``make run``'s own defaults (no ``DATABASE_URL`` or
``REDIS_URL``, ``DEBUG`` unset, Trainboard's settings rather than the tests'), a private
``var/`` and a free port.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from core.local_runtime import launcher

BASE_DIR = Path(__file__).resolve().parent.parent
PRODUCTION_UNSET = ("DATABASE_URL", "REDIS_URL", "DEBUG", "DJANGO_SETTINGS_MODULE")
COMMAND = [sys.executable, "scripts/run.py"]


def production_env(var: Path, port: int, **overrides: str) -> dict:
    """This process's environment less the test-only settings, pointed at ``var`` and ``port``.

    Its workers do not load the local models as they start (``TRAINBOARD_PRELOAD_MODELS=0``
    unless this environment says otherwise): no make-run test calls a model, and each worker
    process would import torch and load both models, about 7 CPU-seconds a make-run test
    (tests/engine/local/test_local_preload.py tests the loading itself)."""
    env = {k: v for k, v in os.environ.items() if k not in PRODUCTION_UNSET}
    env.setdefault("TRAINBOARD_PRELOAD_MODELS", "0")
    env.update(TRAINBOARD_VAR_DIR=str(var), TRAINBOARD_PORT=str(port), **overrides)
    return env


def run_to_exit(var: Path, timeout: float = 30, **overrides: str) -> subprocess.CompletedProcess:
    """Run it to its end (a start that fails), capturing its output."""
    env = production_env(var, launcher.free_port(), **overrides)
    return subprocess.run(
        COMMAND, cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=timeout
    )


def start(var: Path) -> tuple[subprocess.Popen, int]:
    """Start it in the background; returns the process (stdout piped, stderr merged) and port."""
    port = launcher.free_port()
    proc = subprocess.Popen(
        COMMAND,
        cwd=BASE_DIR,
        env=production_env(var, port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, port


def wait_until_up(proc: subprocess.Popen, timeout: float = 90) -> str:
    """Read its output until it says it is up (or ends, or ``timeout`` passes); return it."""
    return read_until(proc, "is up at", timeout)


def read_until(proc: subprocess.Popen, text: str, timeout: float = 60) -> str:
    """Read its output until a line holds ``text`` (or it ends, or ``timeout`` passes)."""
    deadline, lines = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            break
    return "".join(lines)
