"""Benchmark: how long a 1M-row (~10 MB) dataset import holds SQLite's write lock.

    .venv/bin/python bench/import_lock.py [--rows 1000000] [--skip-baseline]

Creates a fresh SQLite database (WAL, 30 s busy timeout: the embedded default settings)
in a temp dir, uploads a generated CSV, and creates the dataset twice:

* baseline: the same import inside one ``transaction.atomic()`` - what
  ``datasets.services`` did before imports were chunked.
* chunked: ``create_dataset_from_upload`` as it is now (one short transaction per chunk).

Beside each import a separate process writes like a login / a heartbeat does
(``UPDATE auth_user SET last_login``, every 0.1 s, busy timeout 30 s, as the app's
connections have) and records how long each write waited; a write that waited the whole
30 s fails with "database is locked" (a login's 500). The longest wait is the longest time
the import held the write lock against another writer.

The chunked case also times the importer's own writes (each chunk's transaction, each
autocommit UPDATE/DELETE): the longest is its longest single hold of the write lock.

Last line: ``import_lock rows=N chunked_max_hold_s=… chunked_max_wait_s=…
baseline_max_wait_s=… failed_writes=…``.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = textwrap.dedent(
    """
    import sqlite3, sys, time
    db, stop_file = sys.argv[1], sys.argv[2]
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=30000")
    waits, failed = [], 0
    while True:
        stopping = __import__("os").path.exists(stop_file)
        started = time.monotonic()
        try:
            conn.execute("UPDATE auth_user SET last_login=datetime('now') WHERE id=1")
        except sqlite3.OperationalError:
            failed += 1
        waits.append(time.monotonic() - started)
        if stopping:
            break
        time.sleep(0.1)
    print(f"{max(waits):.3f} {failed} {len(waits)}")
    """
)


def generate(path: Path, rows: int) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write("q,a\n")
        for index in range(rows):
            out.write(f"q{index},{index % 97}\n")


class WriteTimer:
    """Times the importer's own writes: each chunk's transaction and each autocommit write.

    The longest of them is the longest single hold of the write lock by the import.
    """

    WRITES = ("INSERT", "UPDATE", "DELETE")

    def __init__(self):
        self.longest = 0.0
        self.what = ""
        self.depth = 0

    def __call__(self, execute, sql, params, many, context):
        if self.depth or not sql.lstrip().upper().startswith(self.WRITES):
            return execute(sql, params, many, context)
        started = time.monotonic()
        try:
            return execute(sql, params, many, context)
        finally:
            self.note(time.monotonic() - started, sql[:60])

    def note(self, seconds: float, what: str) -> None:
        if seconds > self.longest:
            self.longest, self.what = seconds, what

    def transaction(self, insert_chunk):
        def timed(batch):
            started = time.monotonic()
            self.depth += 1
            try:
                insert_chunk(batch)
            finally:
                self.depth -= 1
                self.note(time.monotonic() - started, f"a chunk of {len(batch)} rows")

        return timed


def measure(label: str, db: Path, create) -> tuple[float, int, float]:
    """Run ``create`` beside the probe process; (longest probe wait, failed writes, seconds)."""
    stop_file = db.with_suffix(f".{label}.stop")
    probe = subprocess.Popen(
        [sys.executable, "-c", PROBE, str(db), str(stop_file)], stdout=subprocess.PIPE, text=True
    )
    time.sleep(0.5)
    started = time.monotonic()
    create()
    elapsed = time.monotonic() - started
    stop_file.touch()
    longest, failed, writes = probe.communicate(timeout=120)[0].split()
    print(
        f"{label:9s} import {elapsed:6.1f} s; beside it {writes} writes, longest wait "
        f"{float(longest):.3f} s, failed {failed}",
        flush=True,
    )
    return float(longest), int(failed), elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tb-import-lock-"))
    try:
        bench(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench(args: argparse.Namespace, tmp: Path) -> None:
    db = tmp / "bench.sqlite3"
    os.environ.update(
        DATABASE_URL=f"sqlite:///{db}",
        TRAINBOARD_VAR_DIR=str(tmp / "var"),
        DJANGO_SETTINGS_MODULE="project.settings",
    )
    os.environ.pop("REDIS_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.files import File
    from django.core.management import call_command
    from django.db import connection, transaction

    from datasets import services

    settings.MEDIA_ROOT = tmp / "media"
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-password-1")
    source = tmp / "big.csv"
    generate(source, args.rows)
    size_mb = source.stat().st_size / 1e6
    print(f"{args.rows} rows, {size_mb:.1f} MB CSV, SQLite {db}", flush=True)
    mapping = [
        {"column": "q", "role": "input", "name": "q", "type": "str"},
        {"column": "a", "role": "target", "name": "a", "type": "int"},
    ]

    def upload():  # saved and profiled before the clock starts, as a separate request does
        with open(source, "rb") as stream:
            return services.save_upload(user, File(stream, name="big.csv"))

    def create(pending, name: str):
        return services.create_dataset_from_upload(pending, name=name, mapping_entries=mapping)

    def create_in_one_transaction(pending):
        with transaction.atomic():
            create(pending, "baseline")

    baseline = (float("nan"), 0, 0.0)
    if not args.skip_baseline:
        pending = upload()
        baseline = measure("baseline", db, lambda: create_in_one_transaction(pending))
    pending = upload()
    timer = WriteTimer()
    services._insert_chunk = timer.transaction(services._insert_chunk)
    with connection.execute_wrapper(timer):
        chunked = measure("chunked", db, lambda: create(pending, "chunked"))
    print(
        f"chunked   longest single write transaction of the import {timer.longest:.3f} s "
        f"({timer.what})"
    )
    print(
        f"import_lock rows={args.rows} chunked_max_hold_s={timer.longest:.3f} "
        f"chunked_max_wait_s={chunked[0]:.3f} "
        f"baseline_max_wait_s={baseline[0]:.3f} failed_writes={chunked[1]} "
        f"(baseline {baseline[1]}) import_s={chunked[2]:.1f}"
    )


if __name__ == "__main__":
    main()
