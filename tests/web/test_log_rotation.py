"""``make run``'s log files are rotated in place while the process writing them goes on."""

from __future__ import annotations

import subprocess
import sys

from core.local_runtime import log_rotation

WRITER = """
import sys
for i in range(20000):
    sys.stdout.write(f"line {i:06d} " + "x" * 80 + "\\n")
    sys.stdout.flush()
    if i == 5000:
        sys.stderr.write("half\\n")
        sys.stderr.flush()
        sys.stdin.readline()  # wait until the test has rotated the file once
"""


def test_a_log_is_rotated_while_its_writer_appends(tmp_path):
    log = tmp_path / "worker.log"
    with open(log, "ab") as handle:
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER],
            stdout=handle,
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    assert writer.stderr.readline() == b"half\n"  # 5,001 lines written, the writer waits
    assert log_rotation.rotate(log, max_bytes=100_000, backups=2)
    writer.communicate(b"go\n", timeout=30)
    assert writer.returncode == 0
    first = (tmp_path / "worker.log.1").read_text()
    rest = log.read_text()
    assert first.startswith("line 000000 ") and "line 005000 " in first
    assert "\0" not in rest  # the writer went on at the new end, not at its old offset
    assert rest.splitlines()[-1].startswith("line 019999 ")
    assert not log_rotation.rotate(tmp_path / "missing.log", max_bytes=1)


def test_old_logs_shift_and_the_oldest_is_dropped(tmp_path):
    log = tmp_path / "web.log"
    for turn in range(4):
        log.write_text(f"turn {turn}\n" * 100)
        assert log_rotation.rotate(log, max_bytes=10, backups=2)
    assert (tmp_path / "web.log.1").read_text().startswith("turn 3")
    assert (tmp_path / "web.log.2").read_text().startswith("turn 2")
    assert not (tmp_path / "web.log.3").exists()
    assert log.read_text() == ""
    assert not log_rotation.rotate(log, max_bytes=10, backups=2)
