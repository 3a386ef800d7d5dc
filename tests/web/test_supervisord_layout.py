"""The production layout (deploy/supervisord.conf) runs: supervisord starts web, worker and
reaper with Trainboard's production settings; the site answers; a worker killed with -9 is
started again by supervisord while the web server keeps running; a stop stops them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from core.local_runtime import launcher
from tests import make_run_process
from tests.private_redis import private_redis_fixture  # noqa: F401  (fixture "private_redis")
from tests.support.waiting import until

BASE_DIR = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent
CONF = BASE_DIR / "deploy" / "supervisord.conf"


def ctl(env: dict, *args: str) -> str:
    done = subprocess.run(
        [str(BIN / "supervisorctl"), "-c", str(CONF), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout.strip()


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def test_supervisord_runs_the_stack_and_restarts_a_killed_worker(tmp_path, private_redis):
    var = tmp_path / "var"
    for folder in ("log", "run"):
        (var / folder).mkdir(parents=True)
    port = launcher.free_port()
    env = make_run_process.production_env(
        var,
        port,
        DJANGO_SETTINGS_MODULE="project.settings",
        TRAINBOARD_HOST="127.0.0.1",
        TRAINBOARD_WORKER_CONCURRENCY="1",
        REDIS_URL=private_redis.url,
    )
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert migrated.returncode == 0, migrated.stderr
    supervisord = subprocess.Popen(
        [str(BIN / "supervisord"), "-c", str(CONF)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        until(
            lambda: answers(f"http://127.0.0.1:{port}/accounts/login/"),
            90,
            "the site answers",
            poll=0.3,
        )
        status = until(
            lambda: (lambda s: s if s.count("RUNNING") == 3 else None)(ctl(env, "status")),
            60,
            "web, worker and reaper RUNNING",
            poll=0.3,
        )
        assert all(name in status for name in ("web", "worker", "reaper"))
        web_pid, worker_pid = int(ctl(env, "pid", "web")), int(ctl(env, "pid", "worker"))
        os.kill(worker_pid, signal.SIGKILL)
        new_pid = until(
            lambda: (lambda p: p if p.isdigit() and int(p) not in (0, worker_pid) else None)(
                ctl(env, "pid", "worker")
            ),
            60,
            "supervisord starts the worker again",
            poll=0.3,
        )
        assert launcher.pid_alive(int(new_pid))
        assert int(ctl(env, "pid", "web")) == web_pid
        assert answers(f"http://127.0.0.1:{port}/accounts/login/")
        log = (var / "log" / "web.log").read_text()
        assert " INFO daphne.access: " in log  # the web log, with time and level
    finally:
        supervisord.send_signal(signal.SIGTERM)
        supervisord.wait(90)
    assert not launcher.pid_alive(web_pid)
