"""What the browser benches share: a private live stack, a logged-in page and a percentile.

Not a benchmark itself; the scripts that use it put the project root and ``tests/browser``
on ``sys.path`` first. ``stream_latency.py``, ``live_resilience.py`` and ``population_map.py``
each start their own Trainboard stack (daphne + Celery worker, the way ``make run`` does) in a
temp ``var/``, with its own embedded Redis unless ``REDIS_URL`` is set, and drive it from
headless Chromium.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass
class PrivateStack:
    """A started stack: ``live`` (tests.conftest.LiveStack), ``redis_proc`` when the bench owns
    its Redis (None on a shared ``REDIS_URL``, which a bench must never stall), ``tmp`` dir."""

    live: object
    redis_proc: object
    tmp: Path


@contextmanager
def private_stack(prefix: str):
    """Start a private stack in a new temp dir; stop it and remove the dir on the way out."""
    from core.local_runtime import embedded_redis
    from core.local_runtime.launcher import _child_setup
    from tests.conftest import start_live_stack

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    redis_proc, stop = None, None
    if not os.environ.get("REDIS_URL"):
        sock = tmp / "redis.sock"
        redis_proc = embedded_redis.start(sock, log_path=tmp / "redis.log", preexec_fn=_child_setup)
        os.environ["REDIS_URL"] = f"unix://{sock}"
    try:
        print("starting server + worker ...", flush=True)
        live, stop = start_live_stack(tmp / "var")
        yield PrivateStack(live=live, redis_proc=redis_proc, tmp=tmp)
    finally:
        if stop:
            stop()
        if redis_proc is not None:
            embedded_redis.stop(redis_proc, tmp / "redis.sock")
        shutil.rmtree(tmp, ignore_errors=True)


def logged_in_page(playwright, live, landing: str = "/runs/"):
    """Headless Debian Chromium (never a downloaded browser), logged in to ``live``.

    The login lands on ``landing``, not on the home page: the home page's first-run card asks
    for the demo program's forecast, whose work would share the cores with whatever the bench
    measures.
    """
    from tests.conftest import CHROMIUM, CHROMIUM_ARGS

    browser = playwright.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
    )
    page = browser.new_context(base_url=live.url).new_page()
    page.goto(f"/accounts/login/?next={landing}")
    page.fill("#id_username", live.username)
    page.fill("#id_password", live.password)
    page.click("button[type=submit]")
    page.wait_for_url(f"**{landing}")
    return browser, page


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile of ``values`` (0 <= q <= 100)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]
