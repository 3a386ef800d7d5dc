"""What the API costs the code that uses it: RemoteMonitor's overhead on a fit, and the
latency of a served program.

A private stack (daphne + a Celery worker in a temp ``var/``, ``bench/live_bench.py``) is
the dashboard. Then, in this process:

* **callback overhead**: the same zero-latency fit (a scripted litellm provider of this
  process, ``tests/support/code_fit.py``: no model time at all, so every millisecond the
  monitor adds shows) runs ``--repeats`` times without and with ``RemoteMonitor``,
  interleaved; the figure is the median with against the median without (what is still
  queued when a fit ends is delivered before the next one starts, outside its time, as a
  script's exit or a notebook's idle kernel would);
* **served latency**: ``--calls`` sequential ``POST /api/programs/<id>/predict`` with a token
  on a program of the scripted ``fake/keywords`` model; the baseline, in the same run, is a
  token-authenticated ``GET /api/programs/<id>`` (what any API call costs).

Last line: ``api: callback overhead O %, served p50 A ms p95 B ms``.

    .venv/bin/python bench/api.py [--rows 60] [--epochs 3] [--repeats 5] [--calls 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.settings")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["TRAINBOARD_API_RATE"] = "100000/min"  # the bench measures latency, not the limit


async def one_fit(rows: int, epochs: int, monitor) -> float:
    from tests.support import code_fit

    program = await code_fit.build()
    x, y = code_fit.rows(rows)
    callbacks = [monitor] if monitor is not None else []
    started = time.perf_counter()
    await program.fit(x, y, epochs=epochs, batch_size=8, seed=3, callbacks=callbacks)
    return time.perf_counter() - started


def callback_overhead(live, token: str, rows: int, epochs: int, repeats: int) -> float:
    import training.engine as synalinks

    asyncio.run(one_fit(rows, epochs, None))  # warm-up: imports, litellm's first call
    without, with_monitor = [], []
    for _ in range(repeats):
        without.append(asyncio.run(one_fit(rows, epochs, None)))
        monitor = synalinks.callbacks.RemoteMonitor(url=live.url, token=token)
        with_monitor.append(asyncio.run(one_fit(rows, epochs, monitor)))
        delivered = monitor.outbox.wait_sent(120)  # before the next fit, outside its time
        if not delivered or monitor.dropped:
            raise SystemExit(f"the dashboard missed events: dropped {monitor.dropped}")
    base, monitored = statistics.median(without), statistics.median(with_monitor)
    print(
        f"fit of {rows} rows x {epochs} epochs: without the monitor median {base * 1000:.0f} ms "
        f"({', '.join(f'{t * 1000:.0f}' for t in without)}), with it {monitored * 1000:.0f} ms "
        f"({', '.join(f'{t * 1000:.0f}' for t in with_monitor)})",
        flush=True,
    )
    return (monitored - base) / base * 100


def latencies(call, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        answer = call()
        times.append((time.perf_counter() - started) * 1000)
        if answer.status_code != 200:
            raise SystemExit(f"the API answered {answer.status_code}: {answer.text[:300]}")
    return times


def served_latency(live, token: str, calls: int) -> tuple[float, float]:
    import requests
    from live_bench import percentile

    from tests.browser.helpers_runs import demo_program

    _, program_id = demo_program(live, "served in the bench", "fake/keywords")
    headers = {"Authorization": f"Bearer {token}"}
    session = requests.Session()
    url = f"{live.url}api/programs/{program_id}"
    read = latencies(lambda: session.get(url, headers=headers, timeout=30), calls)
    served = latencies(
        lambda: session.post(
            url + "/predict", json={"message": "my parcel never came"}, headers=headers, timeout=60
        ),
        calls,
    )
    print(
        f"baseline GET /api/programs/<id>: p50 {percentile(read, 50):.0f} ms, "
        f"p95 {percentile(read, 95):.0f} ms ({calls} calls)",
        flush=True,
    )
    print(
        f"served POST /api/programs/<id>/predict: p50 {percentile(served, 50):.0f} ms, "
        f"p95 {percentile(served, 95):.0f} ms ({calls} calls)",
        flush=True,
    )
    return percentile(served, 50), percentile(served, 95)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()

    from live_bench import private_stack

    from tests.browser.helpers_runs import shell

    with private_stack("tb-api-bench-") as stack:
        live = stack.live
        token = shell(
            live,
            "from django.contrib.auth import get_user_model as g; from api import tokens;"
            f"print(tokens.create_token(g().objects.get(username={live.username!r}), 'b')[1])",
        )
        overhead = callback_overhead(live, token, args.rows, args.epochs, args.repeats)
        p50, p95 = served_latency(live, token, args.calls)
    print(f"api: callback overhead {overhead:.1f} %, served p50 {p50:.0f} ms p95 {p95:.0f} ms")


if __name__ == "__main__":
    main()
