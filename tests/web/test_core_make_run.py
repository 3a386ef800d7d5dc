"""scripts/run.py (what `make run` runs): faults stop it with one line. One start follows it
through its life: stale files cleaned, var/ private and DEBUG off, a killed worker started
again while the web server stays up, and Ctrl-C stopping every process it started. (Each
start costs a whole stack: migrations, web, worker, reaper; one start shows them all.)"""

import os
import re
import signal
import stat
import subprocess
import urllib.error
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


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _pid(var, name: str) -> int:
    return int((var / "run" / f"{name}.pid").read_text().split()[0])


def _leave_stale_files(var) -> None:
    """What a crashed start leaves: pid files of a dead process, a socket nobody listens on,
    and a var/ others can read (as a tool other than Trainboard might make it)."""
    var.mkdir(mode=0o755)
    var.chmod(0o755)
    (var / "run").mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (var / "run" / "trainboard.pid").write_text(f"{dead.pid}\nrun.py\n")
    (var / "run" / "web.pid").write_text(f"{dead.pid}\ndaphne\n")
    (var / "redis.sock").write_text("")


def _check_private_and_quiet(var, base: str) -> None:
    """var/ and everything in it owner-only; DEBUG off (a plain 404), static files served."""
    status, text = _get(base + "no/such/page/")
    assert status == 404
    assert "Page not found" in text and "URLconf" not in text and "datasets/" not in text
    status, css = _get(base + "static/core/trainboard.css")
    assert status == 200 and css.strip()
    assert stat.S_IMODE(var.stat().st_mode) == 0o700
    checked = [p for p in var.rglob("*") if not p.is_symlink()]
    names = {p.name for p in checked}
    assert {"trainboard.sqlite3", "secret_key", "web.log", "worker.log"} <= names, names
    loose = [
        f"{p.relative_to(var)} {stat.S_IMODE(p.stat().st_mode):o}"
        for p in checked
        if stat.S_IMODE(p.stat().st_mode) & 0o077
    ]
    assert loose == []


def _kill_the_worker(proc, var, base: str) -> int:
    """A worker killed with -9 is started again; the web server is left alone. Returns the
    new worker's pid."""
    worker_pid, web_pid = _pid(var, "worker"), _pid(var, "web")
    os.kill(worker_pid, signal.SIGKILL)
    said = make_run_process.read_until(proc, "worker started again", timeout=60)
    assert "worker exited with code -9; starting it again in 1 s" in said, said
    new_pid = _pid(var, "worker")
    assert new_pid != worker_pid and launcher.pid_alive(new_pid)
    assert f"worker started again (pid {new_pid})" in said
    assert launcher.pid_alive(web_pid)  # nothing else was stopped or restarted
    assert _get(base + "accounts/login/")[0] == 200
    return new_pid


def test_make_run_from_a_stale_start_to_ctrl_c(tmp_path):
    var = tmp_path / "var"
    _leave_stale_files(var)
    proc, port = make_run_process.start(var)
    base = f"http://127.0.0.1:{port}/"
    try:
        output = make_run_process.wait_until_up(proc)
        assert f"is up at {base}" in output, output
        assert "removed stale trainboard.pid" in output and "removed stale web.pid" in output
        assert "First user created -> username: admin" in output
        children = [_pid(var, name) for name in ("redis", "web", "worker")]
        assert all(launcher.pid_alive(pid) for pid in children)
        _check_private_and_quiet(var, base)
        children.append(_kill_the_worker(proc, var, base))
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert "Stopped." in rest
    assert not any(launcher.pid_alive(pid) for pid in children)
    assert not (var / "redis.sock").exists()
    assert not list((var / "run").glob("*.pid"))
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    web_log = (var / "log" / "web.log").read_text()
    assert re.search(
        stamp + r' INFO daphne\.access: 127\.0\.0\.1:\d+ "GET /accounts/login/" 200', web_log
    )
    worker_log = (var / "log" / "worker.log").read_text()
    assert re.match(stamp + r" (INFO|WARNING) [\w.]+: ", worker_log), worker_log[:300]
    assert "-------------- [queues]" not in worker_log  # no banner: every record has a time
