"""Benchmark: how long ``make run`` takes to set up on a fresh clone, cold and warm.

    nice -n 5 python3 bench/setup_time.py [--rev HEAD] [--installer uv|pip|both]
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
   what ``/healthz`` says of the worker until it is up (``starting`` while it loads the
   models), then the first answer of the local model (``local/smollm2`` through litellm, in
   a new process: imports, model load and one short completion), then Ctrl-C.

``--installer both`` runs each case with uv then with pip (caches of their own), one after
the other, so the two meet the same load.

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
import trainboard_local
import litellm
trainboard_local.register()  # the local provider, as the engine adds it on a first local request
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


def worker_states(port: str, timeout: float = 120.0) -> str:
    """What /healthz says of the worker, each change with its time, until "up"."""
    import json
    import urllib.error
    import urllib.request

    started, seen = time.monotonic(), []
    while time.monotonic() - started < timeout:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
                code, body = reply.status, json.load(reply)
        except urllib.error.HTTPError as error:
            code, body = error.code, json.load(error)
        except OSError:
            code, body = None, {}
        state = f"{code} {body.get('worker')}"
        if not seen or seen[-1][1] != state:
            seen.append((time.monotonic() - started, state))
        if body.get("worker") == "up":
            break
        time.sleep(0.5)
    return ", ".join(f"{state} at +{at:.1f} s" for at, state in seen)


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
        print(f"run: /healthz worker: {worker_states(env['TRAINBOARD_PORT'])}")
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


def caches(tmp: Path, installer: str, keep_wheelhouse: bool) -> dict[str, str]:
    """An environment whose caches all lie in ``tmp/cache-<installer>`` (empty at first)."""
    cache = tmp / f"cache-{installer}"
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(cache),
        "PIP_CACHE_DIR": str(cache / "pip"),
        "npm_config_cache": str(cache / "npm"),
        "TRAINBOARD_INSTALLER": installer,
    }
    for name in ("UV_CACHE_DIR", "TRAINBOARD_WHEELHOUSE", "VIRTUAL_ENV"):
        env.pop(name, None)
    if keep_wheelhouse:
        machine = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        source = os.environ.get("TRAINBOARD_WHEELHOUSE") or machine / "trainboard" / "wheels"
        shutil.copytree(source, cache / "trainboard" / "wheels")
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD", help="the commit to clone (default HEAD)")
    parser.add_argument(
        "--installer",
        choices=["uv", "pip", "both"],
        default="uv",
        help="both: uv and pip case by case, alternately (same load), caches of their own",
    )
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
    installers = ["uv", "pip"] if args.installer == "both" else [args.installer]
    print(f"setup_time: rev {rev}, installers {', '.join(installers)}, {os.cpu_count()} cores")
    results: dict[str, dict[str, float]] = {name: {} for name in installers}
    with tempfile.TemporaryDirectory(prefix="tb-setup-bench-") as tmp:
        tmp = Path(tmp)
        envs = {name: caches(tmp, name, args.keep_wheelhouse) for name in installers}
        for name in installers:
            checkout = clone(rev, tmp / f"cold-{name}")
            results[name]["cold"] = make_setup(checkout, envs[name], f"cold-{name}")
        warm_clones = {}
        for name in installers:
            warm_clones[name] = clone(rev, tmp / f"warm-{name}")
            results[name]["warm"] = make_setup(warm_clones[name], envs[name], f"warm-{name}")
        for name in installers:
            results[name]["stamp"] = make_setup(warm_clones[name], envs[name], f"stamp-{name}")
        for name in installers:
            results[name]["first"] = float("nan")
        if not args.no_run:
            name = installers[0]
            up, results[name]["first"] = run_until_up(warm_clones[name], envs[name])
            cold, warm = results[name]["cold"], results[name]["warm"]
            print(f"make run ({name}): cold {cold + up:.0f} s, warm {warm + up:.0f} s until up")
        for name in installers:
            size = subprocess.run(
                ["du", "-sh", str(warm_clones[name] / ".venv")],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()[:1]
            print(f"venv size ({name}): {' '.join(size)}")
        print(f"load now {load()}")
    for name in installers:
        r = results[name]
        print(f"{name}: cold {r['cold']:.0f} s, warm {r['warm']:.0f} s, stamp {r['stamp']:.1f} s")
    r = results[installers[0]]
    print(
        f"setup: cold {r['cold']:.0f} s, warm {r['warm']:.0f} s, stamp {r['stamp']:.1f} s; "
        f"first answer {r['first']:.1f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
