"""Does a team lose runs when things break? Faults on a real stack, and one user's flood.

Question it answers: on PostgreSQL + Redis with two workers (one worker process each) and a
loopback listener standing in for every provider, with runs going on:

1. Redis restarts (no persistence) with runs running and one queued;
2. a worker's main process is killed with -9 (then started again, as ``make run`` does);
3. a whole worker is killed (its process group: a lost host), started again 5 s later;
4. the stack is stopped mid-run the way ``make run`` stops it (``stop_runs pause``, then
   SIGTERM) and started again (``prepare``);
5. one user fires 200 page loads at once while another loads the runs page 20 times.

Figures: runs lost (not succeeded at the end, of all launched), runs that needed a resume
and got it without a person, epochs completed twice (an epoch's row written again after a
resume: watched every 0.5 s), requests that reached an address no program names (the
provider's public API stand-in, and Ollama's and llamafile's default ports when free), and
the other user's page time p95 during the flood.

Run: nice -n 5 .venv/bin/python bench/faults.py   (needs PostgreSQL on 127.0.0.1:5432, user
postgres, trust; makes and drops its own database; starts its own redis-server)
Last line:
``faults: runs lost L of N, resumed without a person R of S, epochs run twice E; requests to
unnamed addresses X; other user's page p95 P s``
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.local_runtime import embedded_redis, launcher  # noqa: E402

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
DATABASE = f"tb_faults_{os.getpid()}"
LATENCY = 0.15  # seconds the listener takes per answer: runs last long enough to be hit
RUN = {"epochs": 5, "batch_size": 8, "evaluations_before": 0, "evaluations_after": 1}
PASSWORD = "faults-password-2026"


class Listener(ThreadingHTTPServer):
    """Answers every chat completion with a label after ``LATENCY`` s; counts requests."""

    daemon_threads = True

    def __init__(self, port: int = 0):
        self.count = 0
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.count += 1
        time.sleep(LATENCY)
        answer = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": '{"team": "ledger"}'},
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


class Redis:
    """A redis-server on a TCP port of its own, restartable (no persistence, like a default
    install whose restart loses every message)."""

    def __init__(self, folder: Path):
        self.port = launcher.free_port()
        self.folder = folder
        self.proc = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [embedded_redis.redis_server_binary(), "--port", str(self.port), "--bind",
             "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        import redis

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis.from_url(self.url, socket_timeout=0.5).ping()
                return
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def say(text: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {text}", flush=True)


def until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    say(f"gave up waiting: {what}")
    return None


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="tb-faults-"))
    with psycopg.connect(PG_ADMIN, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{DATABASE}"')
    try:
        measure(work)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(PG_ADMIN, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        shutil.rmtree(work, ignore_errors=True)


def measure(work: Path) -> None:
    endpoint, public = Listener(), Listener()
    defaults = []
    for port in (11434, 8080):  # Ollama's and llamafile's default addresses, when free
        try:
            defaults.append(Listener(port))
        except OSError:
            pass
    redis_server = Redis(work)
    redis_server.start()
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG",)}
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{DATABASE}",
        REDIS_URL=redis_server.url,
        SECRET_KEY="faults-" + "k" * 60,
        TRAINBOARD_VAR_DIR=str(work / "var"),
        TRAINBOARD_MEDIA_ROOT=str(work / "media"),
        TRAINBOARD_HEARTBEAT_SECONDS="1",
        TRAINBOARD_HEARTBEAT_STALE_SECONDS="6",
        TRAINBOARD_WORKER_STATUS_TTL="1",
        OPENAI_API_KEY="server-key-never-sent",
        OPENAI_API_BASE=public.url,  # where "openai/…" goes with no API base of its own
    )
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    import training.engine as synalinks
    from datasets.services import create_demo_dataset
    from training.engine.data_model import create_data_model
    from training.execution.run_config import validate_run_config
    from training.models import EpochLog, Program, Run
    from training.programs import programs as program_services
    from training.programs import saved_endpoints
    from training.runs import launch as launching

    call_command("migrate", verbosity=0)
    User = get_user_model()
    owner = User.objects.create_user("owner", password=PASSWORD)
    User.objects.create_user("other", password=PASSWORD)
    dataset = create_demo_dataset(owner)
    saved_endpoints.save(owner, "lab", endpoint.url, "endpoint-key")
    lm = synalinks.LanguageModel(
        model="openai/gpt-4o-mini", api_base=endpoint.url, endpoint="lab", retries=0
    )
    document = synalinks.Sequential(
        [
            synalinks.Input(data_model=create_data_model("In", dataset.input_schema_fields())),
            synalinks.Generator(
                data_model=create_data_model("Out", dataset.target_schema_fields()),
                language_model=lm,
            ),
        ],
        name="faults",
    ).get_config()
    program = Program.objects.create(
        owner=owner, name="Faults", dataset=dataset, model=lm.model, engine_json=document
    )
    engine = program_services.program_from_json(program.engine_json)
    config = validate_run_config(
        dict(RUN), program_services.output_field_names(engine), dataset.target_names, program.model
    )
    launched: list[int] = []

    def launch() -> int:
        run = launching.launch(owner, program, dataset, dict(config))
        launched.append(run.pk)
        return run.pk

    def status(run_id: int) -> str:
        return Run.objects.filter(pk=run_id).values_list("status", flat=True).first()

    # -- epochs written twice: each (run, epoch) row's creation time, watched ------------------
    seen: dict[tuple[int, int], object] = {}
    twice: set[tuple[int, int]] = set()
    watching = threading.Event()

    def watch() -> None:
        from django.db import connection

        while not watching.is_set():
            for run_id, epoch, created in EpochLog.objects.values_list(
                "run_id", "epoch", "created"
            ):
                key = (run_id, epoch)
                if key in seen and seen[key] != created:
                    twice.add(key)
                seen[key] = created
            time.sleep(0.5)
        connection.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    def stacks() -> tuple[launcher.Stack, launcher.Stack]:
        first = launcher.Stack(
            base_dir=ROOT, var_dir=work / "var-a", env=dict(env), concurrency=1,
            worker_name="faults-a", embedded_redis=False, port=launcher.free_port(),
        )  # fmt: skip
        second = launcher.Stack(
            base_dir=ROOT, var_dir=work / "var-b", env=dict(env), concurrency=1,
            worker_name="faults-b", embedded_redis=False, port=first.port,
        )  # fmt: skip
        return first, second

    def start(first: launcher.Stack, second: launcher.Stack) -> None:
        first.start_worker()
        second.start_worker()
        first.start_web()
        first.wait_until_up(timeout=60)
        first.start_reaper(every=2)
        first.wait_for_worker(timeout=90)
        second.wait_for_worker(timeout=90)

    a, b = stacks()
    start(a, b)
    say(f"stack up at {a.url}")
    try:
        # 1. Redis restarts with two runs running and one queued
        r1, r2, q1 = launch(), launch(), launch()
        until(lambda: status(r1) == status(r2) == "running" and status(q1) == "queued", 60,
              "two running, one queued")  # fmt: skip
        redis_server.stop()
        time.sleep(1)  # Redis away for a moment, as a restart is
        redis_server.start()
        say("1. Redis restarted with 2 runs running, 1 queued")

        # 2. kill -9 of a worker's main process, started again a second later (make run)
        until(lambda: Run.objects.filter(status="running", worker__startswith="faults-a@")
              .exists(), 120, "a run on worker a")  # fmt: skip
        os.kill(a.procs["worker"].pid, signal.SIGKILL)
        a.procs["worker"].wait(10)
        time.sleep(1)
        a.start_worker()
        say("2. worker a's main process killed with -9, started again")

        # 3. a whole worker lost (its process group), back 5 s later
        launch()
        until(lambda: Run.objects.filter(status="running", worker__startswith="faults-b@",
              checkpoint__epoch__isnull=False).exists(), 120, "a run with a checkpoint on b")  # fmt: skip
        os.killpg(b.procs["worker"].pid, signal.SIGKILL)
        b.procs["worker"].wait(10)
        time.sleep(5)
        b.start_worker()
        say("3. worker b killed whole (a lost host), started again 5 s later")

        # 4. the stack stopped mid-run as make run stops it, then started again
        r4 = launch()
        until(lambda: Run.objects.filter(pk=r4, status="running", current_batch__gte=1)
              .exists(), 120, "run 4 under way")  # fmt: skip
        for stack in (a, b):
            stack.manage("stop_runs", "pause", "--worker", "faults-", "--wait", "30", check=False)
        for stack in (a, b):
            stack.stop()
        a, b = stacks()
        start(a, b)
        a.manage("prepare", check=False)
        say("4. stack stopped mid-run (runs paused), started again")

        finished = until(
            lambda: all(status(r) in ("succeeded", "failed", "cancelled") for r in launched),
            300,
            "every run finished",
        )
        say(f"runs: {[(r, status(r)) for r in launched]} (finished: {bool(finished)})")

        # 5. one user's flood while another loads the runs page
        def session(name: str) -> requests.Session:
            s = requests.Session()
            s.get(a.url + "accounts/login/", timeout=10)
            s.post(a.url + "accounts/login/", data={"username": name, "password": PASSWORD,
                   "csrfmiddlewaretoken": s.cookies["csrftoken"]},
                   headers={"Referer": a.url + "accounts/login/"}, timeout=10)  # fmt: skip
            return s

        flooder, reader = session("owner"), session("other")
        cookies = flooder.cookies.get_dict()
        times: list[float] = []

        def read_pages() -> None:
            for _ in range(20):
                started = time.perf_counter()
                reader.get(a.url + "runs/", timeout=60)
                times.append(time.perf_counter() - started)

        other_user = threading.Thread(target=read_pages)
        with ThreadPoolExecutor(200) as pool:
            other_user.start()
            answers = list(
                pool.map(
                    lambda _: (
                        requests.get(a.url + "runs/", cookies=cookies, timeout=60).status_code
                    ),
                    range(200),
                )
            )
            other_user.join(120)
        p95 = statistics.quantiles(times, n=20)[-1] if len(times) >= 2 else float("nan")
        say(f"5. flood: {answers.count(200)} answered, {answers.count(429)} refused (429); "
            f"other user's page median {statistics.median(times):.2f} s, p95 {p95:.2f} s")  # fmt: skip
    finally:
        watching.set()
        watcher.join(5)
        for stack in (a, b):
            stack.stop()
        redis_server.stop()

    runs = list(
        Run.objects.filter(pk__in=launched).values("pk", "status", "attempt", "auto_resumes")
    )
    lost = sum(r["status"] != "succeeded" for r in runs)
    needed = [r for r in runs if r["attempt"] > 1]
    resumed = sum(r["status"] == "succeeded" for r in needed)
    unnamed = public.count + sum(listener.count for listener in defaults)
    print(f"runs: {runs}")
    print(f"endpoint requests {endpoint.count}; unnamed addresses watched: {1 + len(defaults)}")
    print(
        f"faults: runs lost {lost} of {len(runs)}, resumed without a person {resumed} of "
        f"{len(needed)}, epochs run twice {len(twice)}; requests to unnamed addresses "
        f"{unnamed}; other user's page p95 {p95:.2f} s"
    )


if __name__ == "__main__":
    main()
