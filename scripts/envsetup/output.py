"""What the set-up prints while it runs: the installer's output, a line every 15 s naming
the elapsed time and the current step (a compile says nothing for minutes), and each phase's
time when it ends (``bench/setup_time.py`` and CI's log read those)."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from contextlib import contextmanager

PROGRESS_INTERVAL_S = 15.0
STEP_WIDTH = 80
# pip's own state after a step ("...: started", "...: still running..."): the line says it.
PIP_STEP_STATE = re.compile(r"[.:\s]*(started|still running|finished with status .*)?[.\s]*$")
# The output lines that start a step worth naming in the progress line: pip's, then uv's
# (uv prints a step's line when the step is done).
PIP_STEPS = ("Collecting ", "Building wheel for ", "Installing build dependencies", "Installing ")
UV_STEPS = ("Resolved ", "Prepared ", "Installed ", "Building ", "Built ", "Downloading ")


def format_elapsed(seconds: float) -> str:
    """``75.4`` -> ``"1 min 15 s"``; under a minute, seconds only."""
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


@contextmanager
def phase(name: str):
    """Print ``setup: phase <name>: <seconds> s`` when the block ends."""
    started = time.monotonic()
    yield
    print(f"setup: phase {name}: {time.monotonic() - started:.1f} s", flush=True)


class Progress:
    """Print ``setup: <elapsed> elapsed, <step>`` every ``interval`` seconds until stopped.

    Args:
        interval: Seconds between two lines.
        write: Where a line goes (stdout, flushed, by default: CI pipes it).

    Example:
        with Progress() as progress:
            progress.step = "Building wheel for llama-cpp-python"
    """

    def __init__(self, interval: float = PROGRESS_INTERVAL_S, write=None) -> None:
        self.interval = interval
        self.write = write or (lambda line: print(line, flush=True))
        self.step = "starting the installer"
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="setup-progress", daemon=True)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            elapsed = format_elapsed(time.monotonic() - self.started)
            self.write(f"setup: {elapsed} elapsed, {self.step}")

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()


def run_step(args: list[str], env: dict[str, str], progress: Progress) -> None:
    """Run pip or uv, echoing its output and naming its current step in ``progress``.

    Raises:
        subprocess.CalledProcessError: it exited non-zero (its exit code kept).
    """
    with subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as process:
        for line in process.stdout:
            print(line, end="", flush=True)
            text = line.strip()
            if text.startswith(PIP_STEPS + UV_STEPS):
                step = PIP_STEP_STATE.sub("", text.split(" (from ", 1)[0])
                progress.step = step[:STEP_WIDTH]
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, args)
