"""scripts/run.py (what `make run` runs): faults stop it with one line; stale files are
cleaned; Ctrl-C stops every process it started."""

import os
import re
import signal
import subprocess
import urllib.request

import pytest

from core.local_runtime import launcher
from tests import make_run_process


def run_script(env_overrides, tmp_path, timeout=30):
    return make_run_process.run_to_exit(tmp_path / "var", timeout=timeout, **env_overrides)


@pytest.mark.smoke
@pytest.mark.parametrize(
    "variable,url,address",
    [
        ("DATABASE_URL", "postgres://postgres@127.0.0.1:1/nope", "127.0.0.1:1"),
        ("REDIS_URL", "redis://127.0.0.1:1/0", "127.0.0.1:1"),
        ("REDIS_URL", "unix:///nonexistent/dir/redis.sock", "/nonexistent/dir/redis.sock"),
    ],
)
def test_unreachable_service_stops_with_one_line(tmp_path, variable, url, address):
    result = run_script({variable: url}, tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert variable in lines[0] and address in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def test_make_run_cleans_stale_files_starts_and_stops_everything(tmp_path):
    var = tmp_path / "var"
    (var / "run").mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (var / "run" / "trainboard.pid").write_text(f"{dead.pid}\nrun.py\n")
    (var / "run" / "web.pid").write_text(f"{dead.pid}\ndaphne\n")
    (var / "redis.sock").write_text("")  # a socket file nobody listens on
    proc, port = make_run_process.start(var)
    try:
        output = make_run_process.wait_until_up(proc)
        assert f"is up at http://127.0.0.1:{port}/" in output, output
        assert "removed stale trainboard.pid" in output and "removed stale web.pid" in output
        assert "First user created -> username: admin" in output
        child_pids = [
            int((var / "run" / f"{n}.pid").read_text().split()[0])
            for n in ("redis", "web", "worker")
        ]
        assert all(launcher.pid_alive(pid) for pid in child_pids)
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert "Stopped." in rest
    assert not any(launcher.pid_alive(pid) for pid in child_pids)
    assert not (var / "redis.sock").exists()
    assert not list((var / "run").glob("*.pid"))


def test_a_killed_worker_is_started_again_while_the_web_server_stays_up(tmp_path):
    var = tmp_path / "var"
    proc, port = make_run_process.start(var)
    try:
        output = make_run_process.wait_until_up(proc)
        assert "is up at" in output, output
        worker_pid = int((var / "run" / "worker.pid").read_text().split()[0])
        web_pid = int((var / "run" / "web.pid").read_text().split()[0])
        os.kill(worker_pid, signal.SIGKILL)
        said = make_run_process.read_until(proc, "worker started again", timeout=60)
        assert "worker exited with code -9; starting it again in 1 s" in said, said
        new_pid = int((var / "run" / "worker.pid").read_text().split()[0])
        assert new_pid != worker_pid and launcher.pid_alive(new_pid)
        assert f"worker started again (pid {new_pid})" in said
        assert launcher.pid_alive(web_pid)  # nothing else was stopped or restarted
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=10) as r:
            assert r.status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert not launcher.pid_alive(new_pid)
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    web_log = (var / "log" / "web.log").read_text()
    assert re.search(
        stamp + r' INFO daphne\.access: 127\.0\.0\.1:\d+ "GET /accounts/login/" 200', web_log
    )
    worker_log = (var / "log" / "worker.log").read_text()
    assert re.match(stamp + r" (INFO|WARNING) [\w.]+: ", worker_log), worker_log[:300]
    assert "-------------- [queues]" not in worker_log  # no banner: every record has a time
