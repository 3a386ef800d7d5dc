"""Benchmark: parse and validate a 100,000-row (~50 MB) JSONL upload with bounded memory.

    .venv/bin/python bench/upload.py [--rows 100000] [--store]

Generates the file in a temp dir, then measures each case in a fresh subprocess (so peak
RSS is not polluted by the previous case):

* stream-jsonl: datasets.ingest reading the JSONL as a stream: the profile pass (types,
  empty and duplicate counts, preview) plus the validation pass (every row converted to
  the mapped field types) - what an upload and a dataset creation do before the database.
* stream-json-array: the same over the same rows written as one JSON array (the
  incremental raw_decode parser).
* baseline: the naive way - read the whole file into memory and json.loads every line
  into a list (no validation at all).
* store (with --store): the whole service path into a temporary SQLite database: save
  and profile the upload, then create the dataset (convert, insert rows, split).

Peak RSS growth = the process's peak resident memory during the case minus its resident
memory just before it (Linux /proc/self/status; the peak is reset via clear_refs).
Aim: < 150 MB growth for the streaming cases, whatever the file size.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = (
    "model train reward epoch prompt answer question dataset split seed field value token "
    "language program module optimizer candidate metric history batch sample label"
).split()


def generate(path: Path, rows: int, as_array: bool = False) -> None:
    rng = random.Random(1234)
    with open(path, "w", encoding="utf-8") as out:
        out.write("[\n" if as_array else "")
        for i in range(rows):
            record = {
                "id": i,
                "question": " ".join(rng.choices(WORDS, k=45)),
                "context": " ".join(rng.choices(WORDS, k=10)),
                "answer": rng.choice(WORDS),
                "score": round(rng.random() * 10, 3),
                "tags": rng.sample(WORDS, 3),
            }
            line = json.dumps(record)
            if as_array:
                out.write(line + (",\n" if i < rows - 1 else "\n"))
            else:
                out.write(line + "\n")
        out.write("]\n" if as_array else "")


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


MAPPING = [
    {"column": "question", "role": "input", "name": "question", "type": "str"},
    {"column": "context", "role": "input", "name": "context", "type": "str"},
    {"column": "tags", "role": "input", "name": "tags", "type": "list[str]"},
    {"column": "answer", "role": "target", "name": "answer", "type": "str"},
    {"column": "score", "role": "target", "name": "score", "type": "float"},
]


def case_stream(path: str, fmt: str) -> dict:
    from datasets.ingest import iter_records
    from datasets.ingest.mapping import MappedRows, validate_mapping
    from datasets.ingest.profile import profile_records

    before = _status("VmRSS")
    _reset_peak()
    start = time.perf_counter()
    with open(path, "rb") as stream:
        profile = profile_records(iter_records(stream, fmt), sniff_strings=False)
    profiled = time.perf_counter()
    mapping = validate_mapping(MAPPING, [c["name"] for c in profile["columns"]])
    count = 0
    with open(path, "rb") as stream:
        for _ in MappedRows(iter_records(stream, fmt), mapping):
            count += 1
    end = time.perf_counter()
    assert count == profile["row_count"]
    return {
        "rows": count,
        "seconds": end - start,
        "profile_seconds": profiled - start,
        "validate_seconds": end - profiled,
        "peak_growth": _status("VmHWM") - before,
    }


def case_baseline(path: str) -> dict:
    before = _status("VmRSS")
    _reset_peak()
    start = time.perf_counter()
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    end = time.perf_counter()
    return {"rows": len(rows), "seconds": end - start, "peak_growth": _status("VmHWM") - before}


def case_store(path: str) -> dict:
    var = tempfile.mkdtemp(prefix="tb-bench-")
    os.environ.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        TRAINBOARD_VAR_DIR=var,
        DATABASE_URL=f"sqlite:///{var}/bench.sqlite3",
        TRAINBOARD_UPLOAD_MAX_BYTES=str(1 << 30),
    )
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import TemporaryUploadedFile
    from django.core.management import call_command

    from datasets import services

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-password-1")
    size = os.path.getsize(path)
    upload_file = TemporaryUploadedFile("bench.jsonl", "application/x-ndjson", size, None)
    with open(path, "rb") as source:
        while chunk := source.read(1 << 20):
            upload_file.write(chunk)
    upload_file.seek(0)
    before = _status("VmRSS")
    _reset_peak()
    start = time.perf_counter()
    pending = services.save_upload(user, upload_file, "jsonl")
    uploaded = time.perf_counter()
    dataset = services.create_dataset_from_upload(
        pending, name="bench", mapping_entries=MAPPING, test_ratio=0.2, seed=1
    )
    end = time.perf_counter()
    return {
        "rows": dataset.row_count,
        "seconds": end - start,
        "profile_seconds": uploaded - start,
        "validate_seconds": end - uploaded,
        "peak_growth": _status("VmHWM") - before,
    }


def run_case(name: str, path: Path) -> dict:
    completed = subprocess.run(
        [sys.executable, __file__, "--case", name, "--path", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise SystemExit(f"case {name} failed:\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--store", action="store_true", help="also time the full DB path")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.case:
        sys.path.insert(0, str(ROOT))
        cases = {
            "stream-jsonl": lambda: case_stream(args.path, "jsonl"),
            "stream-json-array": lambda: case_stream(args.path, "json"),
            "baseline": lambda: case_baseline(args.path),
            "store": lambda: case_store(args.path),
        }
        print(json.dumps(cases[args.case]()))
        return

    with tempfile.TemporaryDirectory(prefix="tb-upload-bench-") as tmp:
        jsonl = Path(tmp) / "data.jsonl"
        array = Path(tmp) / "data.json"
        generate(jsonl, args.rows)
        generate(array, args.rows, as_array=True)
        size_mb = jsonl.stat().st_size / 1e6
        print(f"generated {args.rows:,} rows: JSONL {size_mb:.1f} MB, "
              f"JSON array {array.stat().st_size / 1e6:.1f} MB")  # fmt: skip
        results = {
            "stream-jsonl": run_case("stream-jsonl", jsonl),
            "stream-json-array": run_case("stream-json-array", array),
            "baseline": run_case("baseline", jsonl),
        }
        if args.store:
            results["store"] = run_case("store", jsonl)

    print(f"\n{'case':<20}{'rows':>9}{'time s':>9}{'rows/s':>10}{'MB/s':>8}{'peak RSS +MB':>14}")
    for name, result in results.items():
        seconds = result["seconds"]
        print(
            f"{name:<20}{result['rows']:>9,}{seconds:>9.2f}{result['rows'] / seconds:>10,.0f}"
            f"{size_mb / seconds:>8.1f}{result['peak_growth'] / 1e6:>14.1f}"
        )
        if "profile_seconds" in result:
            print(f"{'':<20}profile {result['profile_seconds']:.2f} s + "
                  f"validate/store {result['validate_seconds']:.2f} s")  # fmt: skip
    stream, base = results["stream-jsonl"], results["baseline"]
    print(
        f"\nstreaming vs baseline: {stream['seconds'] / base['seconds']:.1f}x the time "
        f"(it also profiles, hashes for duplicates and converts every row), "
        f"{stream['peak_growth'] / max(base['peak_growth'], 1):.2f}x the peak memory."
    )
    worst = max(r["peak_growth"] for k, r in results.items() if k != "baseline") / 1e6
    verdict = "OK" if worst < 150 else "OVER"
    print(f"aim: peak RSS growth < 150 MB for the streaming paths: {worst:.1f} MB -> {verdict}")


if __name__ == "__main__":
    main()
