"""Benchmark: how long ``make run`` takes to set up on a fresh clone, cold and warm.

    nice -n 5 .venv/bin/python bench/setup_time.py [--rev HEAD] [--installer uv|pip]
        [--keep-wheelhouse] [--no-run]

In a temporary folder, with every cache the install uses pointed inside it
(``XDG_CACHE_HOME``: uv's cache, the uv tool and llama-cpp-python's wheelhouse under
``trainboard/``; ``PIP_CACHE_DIR``; ``npm_config_cache``), so the machine's own caches are
neither used nor touched (pip's configuration, i.e. where packages come from, stays):

1. cold: a fresh clone of ``--rev``, ``make setup`` with the caches empty (the uv
   bootstrap, and the llama-cpp-python compile unless ``--keep-wheelhouse`` copies the
   machine's built wheel in: the figure a prebuilt binding would give);
2. warm: a second fresh clone with a new ``.venv``, ``make setup`` with the caches filled;
3. stamp: ``make setup`` again in that clone (the install skipped);
4. run: ``make run`` in the warm clone until it says "Trainboard is up" (its own count),
   then the first answer of the local model (``local/smollm2`` through litellm, in a new
   process: imports, model load and one short completion), then Ctrl-C.

Each ``make setup`` prints its phases (``setup: phase ...``); they are repeated here with
the 1-minute load average before and after (the machine is shared: read the figures
with it). Last line:
``setup: cold X s, warm Y s, stamp Z s; first answer A s``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASE_LINE = re.compile(r"^setup: phase (?P<name>.+?): (?P<seconds>[\d.]+) s$")
UP_LINE = re.compile(r"Trainboard is up at \S+\s+\((?P<seconds>[\d.]+) s\)")
RUN_TIMEOUT_S = 600
FIRST_ANSWER = """
import time
started = time.perf_counter()
import training.engine.local  # registers the local provider
import litellm
reply = litellm.completion(
    model="local/smollm2",
    messages=[{"role": "user", "content": "What is the capital of France?"}],
    max_tokens=16,
    temperature=0.0,
)
text = reply.choices[0].message.content
assert text.strip(), "the local model gave an empty answer"
print(f"first answer {time.perf_counter() - started:.2f} s: {text.strip()[:60]!r}")
"""


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def clone(rev: str, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(where)], check=True)
    subprocess.run(["git", "-C", str(where), "checkout", "-q", rev], check=True)
    return where


def make_setup(checkout: Path, env: dict[str, str], label: str) -> float:
    """``make setup`` in ``checkout``: its wall time; prints its phases and the load."""
    before = load()
    started = time.monotonic()
    done = subprocess.run(
        ["make", "setup"], cwd=checkout, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - started
    log = checkout.parent / f"{label}.log"
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"bench: make setup ({label}) failed: exit {done.returncode}")
    phases = [m.groups() for m in map(PHASE_LINE.match, done.stdout.splitlines()) if m]
    print(f"{label}: {seconds:.1f} s (load {before} -> {load()})")
    for name, phase_seconds in phases:
        print(f"  {name}: {phase_seconds} s")
    return seconds


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_until_up(checkout: Path, env: dict[str, str]) -> tuple[float, float]:
    """``make run`` in ``checkout``: (seconds until up by its own count, first answer s)."""
    env = {**env, "TRAINBOARD_PORT": str(free_port())}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    process = subprocess.Popen(
        ["make", "run"],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    up = None
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        for line in process.stdout:
            found = UP_LINE.search(line)
            if found:
                up = float(found["seconds"])
                break
            if time.monotonic() > deadline:
                break
        if up is None:
            raise SystemExit("bench: make run did not come up")
        answer = subprocess.run(
            [str(checkout / ".venv" / "bin" / "python"), "-c", FIRST_ANSWER],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        if answer.returncode:
            raise SystemExit(f"bench: the local model did not answer: {answer.stderr[-2000:]}")
        print(f"run: up in {up:.1f} s (load {load()}); {answer.stdout.strip()}")
        first = float(re.search(r"first answer ([\d.]+) s", answer.stdout)[1])
        return up, first
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD", help="the commit to clone (default HEAD)")
    parser.add_argument("--installer", choices=["uv", "pip"], default="uv")
    parser.add_argument(
        "--keep-wheelhouse",
        action="store_true",
        help="cold run with the machine's built llama-cpp-python wheel (no compile)",
    )
    parser.add_argument("--no-run", action="store_true", help="skip make run / first answer")
    args = parser.parse_args()
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.rev],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"setup_time: rev {rev}, installer {args.installer}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="tb-setup-bench-") as tmp:
        tmp = Path(tmp)
        cache = tmp / "cache"
        env = {
            **os.environ,
            "XDG_CACHE_HOME": str(cache),
            "PIP_CACHE_DIR": str(cache / "pip"),
            "npm_config_cache": str(cache / "npm"),
            "TRAINBOARD_INSTALLER": args.installer,
        }
        for name in ("UV_CACHE_DIR", "TRAINBOARD_WHEELHOUSE", "VIRTUAL_ENV"):
            env.pop(name, None)
        if args.keep_wheelhouse:
            machine = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            source = os.environ.get("TRAINBOARD_WHEELHOUSE") or machine / "trainboard" / "wheels"
            shutil.copytree(source, cache / "trainboard" / "wheels")
        cold = make_setup(clone(rev, tmp / "cold"), env, "cold")
        warm_clone = clone(rev, tmp / "warm")
        warm = make_setup(warm_clone, env, "warm")
        stamp = make_setup(warm_clone, env, "stamp")
        first = float("nan")
        if not args.no_run:
            up, first = run_until_up(warm_clone, env)
            print(f"make run: cold {cold + up:.0f} s, warm {warm + up:.0f} s until up")
        venv_size = subprocess.run(
            ["du", "-sh", str(warm_clone / ".venv")], capture_output=True, text=True, check=False
        ).stdout.split()[:1]
        print(f"venv size: {' '.join(venv_size)}; load now {load()}")
    print(
        f"setup: cold {cold:.0f} s, warm {warm:.0f} s, stamp {stamp:.1f} s; first answer {first:.1f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
