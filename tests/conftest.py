"""Shared fixtures: a live Trainboard stack and a Playwright page on Debian's Chromium.

Why a separate database for live tests
--------------------------------------
pytest-django's test database lives in the pytest process (SQLite: in memory), so a
daphne or Celery subprocess could never see it. ``live_stack`` therefore builds its own
database that the subprocesses share, and never touches pytest-django's:

* ``DATABASE_URL`` unset -> a SQLite file (WAL) in a temp dir;
* ``DATABASE_URL=postgres://…`` -> a database ``trainboard_live_<pid>_<n>`` created on that
  server for this session and dropped at the end.

It starts daphne and a Celery worker exactly as ``make run`` does
(core.local_runtime.launcher), on a free port and the session's Redis (root conftest.py), and
meanwhile runs ``manage.py prepare`` there (migrations + a first user with a known password +
``bootstrap_demo`` if some app defines it). It is session-scoped: start cost (~5-10 s) is paid
once; at the end the worker stops cold (nothing of the session is kept). Its processes run
with the test settings (``tests.support.settings``: the scripted ``fake/…`` models, the echo
WebSocket and the plumbing tasks of tests/support/).

Using it from another app's tests
---------------------------------
* ``live_stack.url`` (ends with "/"), ``.username``, ``.password``, ``.user_id``.
* Seed data in the live database with ``live_stack.manage("loaddata", path)`` or your own
  management command (``live_stack.shell(code)`` runs Python there and returns what it
  printed, in one Django process for the session: tests/live_shell.py). Do NOT use
  the ``db`` fixture for live data: that is another database.
* Tasks queued from the test process (``task.delay()``) go to the same broker queue and
  are executed by the live worker, against the live database.
* ``logged_in_page``: a blank Playwright page whose context is logged in as that user;
  ``browser_page``: a fresh page (own context, no cookies) with ``base_url`` set.
* Mark browser tests ``@pytest.mark.browser`` and keep async tests out of their modules
  (the Playwright sync API holds an event loop while a module's browser is open).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from core.local_runtime import launcher
from tests.live_shell import LiveShell
from training.engine.language_models import offline

# The offline models, as an installed engine finds them through its entry point.
offline.register_module("trainboard_local")

BASE_DIR = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("TRAINBOARD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TEST_SETTINGS = "tests.support.settings"
TEST_ASGI_APPLICATION = "tests.support.asgi:application"
#: The test stack's WebSocket keepalive (ping interval, ping timeout), seconds: daphne's own
#: (20, 30) would take a minute to show one ping and its timeout pass. daphne looks at its
#: timers every 2 s and pings once more than the interval has passed: 1 makes it ping at
#: every look.
LIVE_WS_PING = (1, 10)
_counter = itertools.count()


@dataclass
class LiveStack:
    url: str
    username: str
    password: str
    user_id: int
    env: dict
    stack: launcher.Stack
    live_shell: LiveShell = field(default=None, repr=False)

    def manage(self, *args: str, check: bool = True):
        """Run ``manage.py <args>`` against the live database; returns CompletedProcess."""
        return self.stack.manage(*args, check=check)

    def shell(self, code: str) -> str:
        """What ``manage.py shell -c code`` prints, from one Django process for the session
        (tests/live_shell.py: not a Django start per call)."""
        return self.live_shell.run(code)


#: The end of each live log that a failed test's report shows (``pytest_runtest_makereport``).
LOG_TAIL_LINES = 40
LOG_TAIL_BYTES = 16_384


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test on a live stack reports where its page was and the ends of the stack's
    logs (web, worker, reaper, live shell): a CI run keeps nothing else of a stack that is
    gone when the session ends. Never raises: a report must not stop the session."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    try:
        report.sections.extend(_live_sections(getattr(item, "funcargs", None) or {}))
    except Exception as exc:
        report.sections.append(("live stack", f"not reported: {exc!r}"))


def _live_sections(funcargs: dict) -> list[tuple[str, str]]:
    sections = []
    page = funcargs.get("logged_in_page") or funcargs.get("browser_page")
    if page is not None:
        try:
            text = page.locator("body").inner_text(timeout=2_000)
            sections.append(("live page", f"{page.url}\n{text[:2_000]}"))
        except Exception as exc:  # the page or its browser is gone (a teardown's failure)
            sections.append(("live page", f"not readable: {exc}"))
    # The session's stack, or a module's own (e.g. one told a provider's limit).
    for live in (value for value in funcargs.values() if isinstance(value, LiveStack)):
        for log in sorted(live.stack.log_dir.glob("*.log")):
            sections.append((f"{log.name} of the live stack at {live.url}", _tail(log)))
    return sections


def _tail(path: Path) -> str:
    """The last ``LOG_TAIL_LINES`` lines of the file's last ``LOG_TAIL_BYTES`` bytes."""
    with open(path, "rb") as file:
        file.seek(max(0, file.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
        lines = file.read().decode(errors="replace").splitlines()
    return "\n".join(line[:1_000] for line in lines[-LOG_TAIL_LINES:])


def _postgres_database(url: str):
    """Create a uniquely named database on the server of ``url``; return (url, dropper)."""
    import psycopg

    name = f"trainboard_live_{os.getpid()}_{next(_counter)}"
    parts = urlsplit(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop():
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return urlunsplit(parts._replace(path=f"/{name}")), drop


def start_live_stack(var_dir: Path, concurrency: int = 2) -> tuple[LiveStack, callable]:
    """Start a stack in ``var_dir``; returns (LiveStack, stop). Usable outside fixtures."""
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update(
        TRAINBOARD_VAR_DIR=str(var_dir),
        TRAINBOARD_INITIAL_USERNAME="tester",
        TRAINBOARD_INITIAL_PASSWORD="live-test-password-1",
        PYTHONUNBUFFERED="1",
    )
    # Trainboard's settings plus the test_support app: the fake/… models, ws/echo/ and
    # the plumbing tasks exist in these processes and in no production one.
    env["DJANGO_SETTINGS_MODULE"] = TEST_SETTINGS
    # Most live tests never call a local model: don't load ~1 GB in every test worker.
    env.setdefault("TRAINBOARD_PRELOAD_MODELS", "0")
    # The stack's default embedding model (a finished run's candidate map, the launch form's
    # and a run's default, a worker's preload): the scripted one, so no stack process loads
    # the local embedding model (tests/engine/local test the local model itself).
    env.setdefault("TRAINBOARD_EMBEDDING_MODEL", "fake/embedding")
    drop_db = None
    source = os.environ.get("DATABASE_URL", "")
    if source.startswith(("postgres://", "postgresql://")):
        env["DATABASE_URL"], drop_db = _postgres_database(source)
    else:
        env["DATABASE_URL"] = f"sqlite:///{var_dir / 'live.sqlite3'}"
    stack = launcher.Stack(
        base_dir=BASE_DIR,
        var_dir=var_dir,
        env=env,
        port=launcher.free_port(),
        concurrency=concurrency,
        worker_name=f"live-{os.getpid()}-{next(_counter)}",
        python=sys.executable,
        asgi_application=TEST_ASGI_APPLICATION,
        ws_ping=LIVE_WS_PING,
    )

    live_shell = LiveShell(env, BASE_DIR, log=var_dir / "log" / "live_shell.log")

    def stop():
        # The session's runs are over (or cancelled) and its database goes with it: the
        # worker stops cold (SIGQUIT): a warm stop waits for whatever it is still doing.
        worker = stack.procs.get("worker")
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGQUIT)
        closing = threading.Thread(target=live_shell.close)  # its exit overlaps the stack's
        closing.start()
        stack.stop()
        closing.join()
        if drop_db:
            drop_db()

    try:
        # As make run does: worker and web start while prepare migrates; so does the live
        # shell's Django (none of them touches the database before it is asked to).
        stack.start_worker()
        stack.start_web()
        live_shell.start()
        stack.manage("prepare")
        stack.start_reaper()  # as make run does: pages only read, the reaper fails lost runs
        user_id = int(
            live_shell.run(
                "from django.contrib.auth import get_user_model as g;"
                "print(g().objects.get(username='tester').pk)"
            ).strip()
        )
        stack.wait_until_up(timeout=60)
        stack.wait_for_worker(timeout=60)
    except BaseException:
        stop()
        raise
    live = LiveStack(
        stack.url, "tester", env["TRAINBOARD_INITIAL_PASSWORD"], user_id, env, stack, live_shell
    )
    return live, stop


@pytest.fixture(scope="session")
def live_stack():
    var_dir = Path(tempfile.mkdtemp(prefix="tb-live-"))
    live, stop = start_live_stack(var_dir)
    try:
        yield live
    finally:
        stop()
        shutil.rmtree(var_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    """Module-scoped on purpose: Playwright's sync API keeps an event loop running in the
    main thread while it is started, which breaks pytest-asyncio tests that run later in
    the session. Keep async tests out of modules that use a browser."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def browser_page(browser, live_stack):
    context = browser.new_context(base_url=live_stack.url)
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


def login(page, live_stack) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", live_stack.username)
    page.fill("#id_password", live_stack.password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


#: Prints the cookie of a new session of the stack's user, made as Django's test client makes
#: one (``Client.force_login``): name, value.
FORCE_LOGIN = """
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
client = Client()
client.force_login(get_user_model().objects.get(username={username!r}))
print(settings.SESSION_COOKIE_NAME, client.cookies[settings.SESSION_COOKIE_NAME].value)
"""


def session_cookie(live_stack) -> dict:
    """A new logged-in session of the stack's user, as a cookie for a browser context. The
    log-in form has browser tests of its own (the first-run and first-hour walks, the Team
    page); for every other test, the form's page, its post and the home page it lands on
    cost about a CPU-second (Chromium and daphne) that nothing looks at."""
    name, value = live_stack.shell(FORCE_LOGIN.format(username=live_stack.username)).split()
    return {"name": name, "value": value, "url": live_stack.url}


@pytest.fixture
def logged_in_page(browser_page, live_stack):
    """A blank page of a context logged in as the stack's user: the test goes where it looks."""
    browser_page.context.add_cookies([session_cookie(live_stack)])
    return browser_page
