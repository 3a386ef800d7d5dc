"""A bench's configurations run in child processes, on this tree or on a git revision.

Benches that compare this tree with an earlier revision (``--before REV --together``) start
each configuration as ``python <bench> --run <spec JSON>`` in a fresh process whose code root
is this checkout or a detached worktree of the revision, so both trees run side by side on
the same machine state. The child prints its result as its last JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worktree(revision: str, prefix: str = "bench-before-") -> Path:
    """A detached worktree of ``revision`` in a fresh temporary folder.

    Args:
        revision: Any git revision of this repository.
        prefix: The temporary folder's name prefix.

    Returns:
        The worktree's path (the bench removes it when done, or the OS's temp cleanup does).
    """
    path = Path(tempfile.mkdtemp(prefix=prefix))
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), revision],
        check=True,
        capture_output=True,
    )
    return path


def start(
    script: str, spec: dict, code_root: Path, root_variable: str
) -> tuple[dict, subprocess.Popen]:
    """Start ``script --run <spec>`` with ``code_root`` as the engine's source.

    Args:
        script: The bench's own file (``__file__``).
        spec: The configuration, passed as JSON.
        code_root: The tree whose code the child imports (this checkout or a worktree).
        root_variable: The environment variable the child reads ``code_root`` from.

    Returns:
        ``(spec, process)``, for :func:`finish`.
    """
    process = subprocess.Popen(
        [sys.executable, script, "--run", json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **{root_variable: str(code_root)}),
        cwd=code_root,
    )
    return spec, process


def finish(started: tuple[dict, subprocess.Popen]) -> dict:
    """Wait for a child started by :func:`start`; its last JSON line, or an error with stderr."""
    spec, process = started
    stdout, stderr = process.communicate()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"configuration {spec} failed:\n{stderr[-3000:]}")
    return json.loads(lines[-1])
