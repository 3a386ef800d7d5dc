"""What `make run` starts is private and quiet by default: var/ and everything in it is
owner-only (18.8), and DEBUG stays off unless asked for (18.11), static files still served.
"""

import os
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from core.local_runtime import launcher

BASE_DIR = Path(__file__).resolve().parents[2]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_make_run_keeps_var_private_and_debug_off(tmp_path):
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    var.chmod(0o755)  # an install made before the fix
    port = launcher.free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG", "DJANGO_SETTINGS_MODULE")
    }
    env.update(TRAINBOARD_VAR_DIR=str(var), TRAINBOARD_PORT=str(port))
    proc = subprocess.Popen(
        [sys.executable, "scripts/run.py"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        output = ""
        while time.monotonic() < deadline and "is up at" not in output:
            line = proc.stdout.readline()
            if not line:
                break
            output += line
        assert "is up at" in output, output
        base = f"http://127.0.0.1:{port}/"
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
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
