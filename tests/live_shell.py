"""One Django process that runs the live tests' seeding and polling code, for the session.

The browser tests seed the live database and poll a run's fields with Python run "in
``manage.py shell -c``". A new ``manage.py shell`` per call starts Django every time (about
2 s of a core each on a loaded 2-core machine), and the tests make hundreds of such calls
(every poll of a run's status every half second): minutes of CI spent starting Django.
:class:`LiveShell` starts Django once, with the live stack's environment (its database, the
test settings), and runs each piece of code in a fresh namespace there, as ``shell -c``
would, returning what it printed.

Example:
    ```python
    shell = LiveShell(env, base_dir)
    shell.run("from training.models import Run; print(Run.objects.count())")  # "0\\n"
    shell.close()
    ```
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

#: The server: one JSON request a line ({"code"}), one JSON answer a line ({"out", "error"}).
SERVER = r"""
import contextlib, io, json, sys, traceback
import django
django.setup()
from django.db import close_old_connections
answers = sys.stdout
for line in sys.stdin:
    out, error = io.StringIO(), None
    close_old_connections()
    try:
        with contextlib.redirect_stdout(out):
            code = compile(json.loads(line)["code"], "<live shell>", "exec")
            exec(code, {"__name__": "__main__"})
    except BaseException:
        error = traceback.format_exc()
    answers.write(json.dumps({"out": out.getvalue(), "error": error}) + "\n")
    answers.flush()
"""


class LiveShellError(RuntimeError):
    """The code raised in the live shell; the message is its traceback."""


class LiveShell:
    """Run Python against the live database in one long-lived Django process.

    Args:
        env: the live stack's environment (``DJANGO_SETTINGS_MODULE``, ``DATABASE_URL``...).
        base_dir: the project root (the process's working directory).
        log: where the process's stderr goes (warnings, a crash's traceback).
    """

    def __init__(self, env: dict, base_dir: Path, log: Path | None = None):
        self.env, self.base_dir, self.log = env, base_dir, log
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _started(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            stderr = open(self.log, "ab") if self.log else subprocess.DEVNULL
            self._process = subprocess.Popen(
                [sys.executable, "-c", SERVER],
                cwd=self.base_dir,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                bufsize=1,
            )
            if self.log:
                stderr.close()
        return self._process

    def start(self) -> None:
        """Start the process now (it sets Django up, ~2-7 s, without touching the database):
        the live stack starts it beside ``manage.py prepare``, so the first :meth:`run`
        does not wait for it."""
        with self._lock:
            self._started()

    def run(self, code: str) -> str:
        """Run ``code`` (a fresh namespace each time); returns what it printed.

        Raises:
            LiveShellError: the code raised (its traceback), or the process died.
        """
        with self._lock:
            process = self._started()
            process.stdin.write(json.dumps({"code": code}) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
        if not line:
            raise LiveShellError(
                f"the live shell exited with code {process.wait()} (log: {self.log})"
            )
        answer = json.loads(line)
        if answer["error"]:
            raise LiveShellError(answer["error"])
        return answer["out"]

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                self._process.stdin.close()
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None
