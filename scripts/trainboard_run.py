#!/usr/bin/env python3
"""Launch a Trainboard run from the command line and wait for its verdict (for CI).

Only the standard library: a CI machine needs this file and Python, not the project.

    TRAINBOARD_TOKEN=tb_... python3 trainboard_run.py --url https://trainboard.example \\
        --program 3 --dataset 5 --preset quick --set epochs=2

It prints the run's address at once, its status as it changes, then its verdict, and exits:

* 0: the trained program beat its seed beyond noise on the test split ("improved");
* 1: the run finished but did not ("no better than the seed", "within noise", "worse");
* 2: the run failed, was cancelled or stopped, or the launch was refused (the field and
  message are printed), or the wait ran out (``--timeout``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

FINISHED = ("succeeded", "failed", "cancelled", "stopped")
#: Seconds between two reads of the run's status.
POLL_SECONDS = 2.0
#: Retries of a request the server refused for now (429, 5xx) or did not answer.
RETRIES = 5


class Unreachable(Exception):
    """The server did not answer usefully after the retries."""


def call(base: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    """One API request; its JSON answer (a refusal's JSON too, with its ``status``). A 429,
    a 5xx or no connection is retried (``RETRIES``, honouring ``Retry-After``), then
    Unreachable."""
    request = urllib.request.Request(
        base.rstrip("/") + "/api/" + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    problem = ""
    for attempt in range(RETRIES + 1):
        wait = min(2**attempt, 30)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            if error.code != 429 and error.code < 500:
                try:
                    found = json.loads(error.read() or b"{}")
                except json.JSONDecodeError:
                    found = {"detail": error.reason}
                return {"status": error.code, **found}
            problem = f"HTTP {error.code}"
            wait = float(error.headers.get("Retry-After") or wait)
        except (urllib.error.URLError, TimeoutError, OSError, json.JSONDecodeError) as error:
            problem = str(error)
        if attempt < RETRIES:
            time.sleep(wait)
    raise Unreachable(f"{method} {path}: {problem}")


def settings(pairs: list[str]) -> dict:
    """``--set key=value`` pairs; a value that reads as JSON (2, 0.5, true) is taken as such."""
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set {pair!r}: write it as key=value")
        try:
            found[key] = json.loads(value)
        except json.JSONDecodeError:
            found[key] = value
    return found


def main(argv: list[str] | None = None) -> int:
    try:
        return launch_and_wait(argv)
    except Unreachable as exc:
        print(f"The server did not answer: {exc}", file=sys.stderr)
        return 2


def launch_and_wait(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("TRAINBOARD_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--program", type=int, required=True)
    parser.add_argument("--dataset", type=int, help="default: the program's dataset")
    parser.add_argument("--preset", help="a launch form preset, e.g. quick")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a launch form field (epochs=2, optimizer=OMEGA, ...)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait at most")
    args = parser.parse_args(argv)
    token = os.environ.get("TRAINBOARD_TOKEN", "")
    if not token:
        print("Set TRAINBOARD_TOKEN to a personal token (Settings → API tokens).", file=sys.stderr)
        return 2
    body = {"program": args.program, **settings(args.set)}
    if args.dataset is not None:
        body["dataset"] = args.dataset
    if args.preset:
        body["preset"] = args.preset
    run = call(args.url, token, "POST", "runs/", body)
    if "id" not in run:
        where = f" ({run.get('field')})" if run.get("field") else ""
        print(f"Not launched{where}: {run.get('detail')}", file=sys.stderr)
        return 2
    run_id = run["id"]
    print(f"Run {run_id}: {run['url']}", flush=True)
    deadline = time.monotonic() + args.timeout
    status = None
    while run.get("status") not in FINISHED:
        if "id" not in run:  # refused (the token revoked meanwhile, the run deleted)
            print(f"Run {run_id}: {run.get('detail')}", file=sys.stderr)
            return 2
        if time.monotonic() > deadline:
            print(f"Still {run.get('status')} after {args.timeout:g} s.", file=sys.stderr)
            return 2
        if run.get("status") != status:
            status = run.get("status")
            print(f"  {status}", flush=True)
        time.sleep(POLL_SECONDS)
        run = call(args.url, token, "GET", f"runs/{run_id}")
    before, after = run.get("test_reward_before"), run.get("test_reward_after")
    rewards = f"test {before:.3f} → {after:.3f}; " if None not in (before, after) else ""
    print(f"  {run['status']}: {rewards}{(run.get('outcome') or 'no verdict').replace('_', ' ')}")
    if run["status"] != "succeeded":
        print(f"  {run.get('error') or 'the run did not finish'}", file=sys.stderr)
        return 2
    return 0 if run.get("outcome") == "improved" else 1


if __name__ == "__main__":
    sys.exit(main())
