"""Live socket and /healthz resilience on a private stack.

Starts a private Trainboard stack (daphne + Celery worker, the way ``make run`` does, in a
temp var/ dir; its own embedded Redis unless REDIS_URL is set), opens a run page in headless
Chromium while a run on a scripted fake LM streams, and prints:

1. streaming for ``--minutes``: socket open/close events on the page (reconnects), tracebacks
   in the web log, /healthz answers (polled every 10 s) that were not 200;
2. a Redis stall (SIGSTOP for ``--stall`` s; only with the bench's own Redis, never a shared
   server): seconds until /healthz answered 503, and after SIGCONT seconds until the open page
   showed a new epoch and until /healthz said 200 again, plus reconnects during the stall;
3. 200 parallel anonymous /healthz: p50/p95/max latency and non-200 answers, then whether a
   run launched afterwards still succeeds.

    .venv/bin/python bench/live_resilience.py [--minutes 5] [--stall 25]

Targets: 0 reconnects and 0 tracebacks while streaming; 503 within 3 s in a stall; the page
streams again after a stall; /healthz p95 under 200 parallel requests < 5 s with no failures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BASE_DIR / "tests" / "browser"))

SOCKET_EVENTS = """
window.__sockets = {open: 0, close: 0};
document.addEventListener('htmx:wsOpen', () => window.__sockets.open++);
document.addEventListener('htmx:wsClose', () => window.__sockets.close++);
"""


def healthz(url: str, timeout: float = 60.0) -> tuple[int, float]:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url + "healthz", timeout=timeout) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    except OSError:
        status = 0  # no answer within the timeout
    return status, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--stall", type=float, default=25.0)
    args = parser.parse_args()

    from helpers_runs import ENDLESS, create_program, demo_dataset_id, launch_run, run_field
    from live_bench import logged_in_page, percentile, private_stack
    from playwright.sync_api import sync_playwright

    figures: dict = {}
    with private_stack("tb-bench-live-") as stack:
        live, redis_proc = stack.live, stack.redis_proc
        web_log = live.stack.log_dir / "web.log"
        offset = web_log.stat().st_size
        dataset_id = demo_dataset_id(live)
        program_id = create_program(live, "Bench live", "fake/fewshot?latency=0.1", dataset_id)
        run_id = launch_run(live, program_id, dataset_id, **ENDLESS)
        with sync_playwright() as playwright:
            browser, page = logged_in_page(playwright, live)
            page.add_init_script(SOCKET_EVENTS)
            page.goto(f"/runs/{run_id}/")
            page.locator('#run-epochs tr[data-epoch="0"]').wait_for(timeout=120_000)

            def epochs() -> int:
                return page.locator("#run-epochs tr[data-epoch]").count()

            # 1. A long streamed run.
            print(f"streaming for {args.minutes:g} min ...", flush=True)
            first, bad_health = epochs(), []
            deadline = time.monotonic() + args.minutes * 60
            while time.monotonic() < deadline:
                status, _ = healthz(live.url, timeout=30)
                if status != 200:
                    bad_health.append(status)
                page.wait_for_timeout(10_000)
            sockets = page.evaluate("window.__sockets")
            log = web_log.read_bytes()[offset:].decode(errors="replace")
            figures["stream"] = {
                "epochs_streamed": epochs() - first,
                "reconnects": sockets["open"] - 1,
                "socket_closes": sockets["close"],
                "tracebacks": log.count("Traceback (most recent call last)"),
                "healthz_not_200": len(bad_health),
            }
            print("stream:", json.dumps(figures["stream"]), flush=True)

            # 2. A Redis stall, only on the bench's own Redis.
            if redis_proc is not None:
                print(f"stalling Redis for {args.stall:g} s ...", flush=True)
                before = page.evaluate("window.__sockets")
                os.kill(redis_proc.pid, signal.SIGSTOP)
                stalled_at = time.monotonic()
                try:
                    page.wait_for_timeout(1000)
                    status, took = healthz(live.url, timeout=15)
                    figures["stall"] = {"healthz_status": status, "healthz_seconds": round(took, 2)}
                    page.wait_for_timeout(
                        max(0, args.stall - (time.monotonic() - stalled_at)) * 1000
                    )
                finally:
                    os.kill(redis_proc.pid, signal.SIGCONT)
                resumed, shown = time.monotonic(), epochs()
                page.wait_for_function(
                    f"document.querySelectorAll('#run-epochs tr[data-epoch]').length > {shown}",
                    timeout=120_000,
                )
                after = page.evaluate("window.__sockets")
                while healthz(live.url, timeout=30)[0] != 200 and time.monotonic() - resumed < 60:
                    time.sleep(0.5)
                healthy_after = round(time.monotonic() - resumed, 1)
                figures["stall"].update(
                    page_streams_again_after_s=round(time.monotonic() - resumed, 1),
                    reconnects=after["open"] - before["open"],
                    healthz_200_again_after_s=healthy_after,
                )
                print("stall:", json.dumps(figures["stall"]), flush=True)
            browser.close()

        # 3. 200 parallel anonymous /healthz, then a task through the worker.
        print("200 parallel /healthz ...", flush=True)
        with ThreadPoolExecutor(200) as pool:
            answers = list(pool.map(lambda _: healthz(live.url, timeout=60), range(200)))
        latencies = [took for _, took in answers]
        started = time.monotonic()
        after = launch_run(live, program_id, dataset_id, **{**ENDLESS, "epochs": 1})
        while (
            run_field(live, after, "status") not in ("succeeded", "failed")
            and time.monotonic() - started < 120
        ):
            time.sleep(1)
        figures["flood"] = {
            "not_200": sum(status != 200 for status, _ in answers),
            "p50_s": round(statistics.median(latencies), 2),
            "p95_s": round(percentile(latencies, 95), 2),
            "max_s": round(max(latencies), 2),
            "launch_after": run_field(live, after, "status"),
            "launch_after_s": round(time.monotonic() - started, 1),
        }
        print("flood:", json.dumps(figures["flood"]), flush=True)

    print(json.dumps(figures, indent=2))
    stream, flood = figures["stream"], figures["flood"]
    ok = (
        stream["reconnects"] == 0
        and stream["tracebacks"] == 0
        and stream["healthz_not_200"] == 0
        and flood["not_200"] == 0
        and flood["p95_s"] < 5
        and flood["launch_after"] == "succeeded"
        and ("stall" not in figures or figures["stall"]["healthz_status"] == 503)
    )
    print(
        f"reconnects {stream['reconnects']}, tracebacks {stream['tracebacks']} over "
        f"{args.minutes:g} min; /healthz p95 {flood['p95_s']} s under 200 parallel; "
        f"stall 503 in {figures.get('stall', {}).get('healthz_seconds', 'n/a')} s: "
        f"{'OK' if ok else 'ABOVE TARGET'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
