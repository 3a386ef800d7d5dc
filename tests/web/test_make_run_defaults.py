"""What `make run` starts is private and quiet by default: var/ and everything in it is
owner-only (18.8), and DEBUG stays off unless asked for (18.11), static files still served.
"""

import signal
import stat
import urllib.error
import urllib.request

from tests import make_run_process


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
    proc, port = make_run_process.start(var)
    try:
        output = make_run_process.wait_until_up(proc)
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
