"""The API's address space, ``/api/``: its routers, its docs page and OpenAPI schema.

The routes sit outside the pages' login (a script has a token, not a session): each
authenticates its own token (``auth.TokenAuth``). The docs page and the schema describe the
API, hold nothing of anyone's, and are open, so tools can read the schema.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from ninja import NinjaAPI

from api import errors
from api.auth import TokenAuth, throttles
from api.routes import code_runs, datasets, programs, runs

api = NinjaAPI(
    title="Trainboard API",
    version="1",
    description=(
        "Everything the pages do, for your own code. Authenticate with a personal token "
        "made in Settings: `Authorization: Bearer tb_…`. Errors are JSON: "
        '`{"detail": "what is wrong", "field": "where"}`.'
    ),
    auth=TokenAuth(),
    throttle=throttles(),
    docs_url="/docs",
    urls_namespace="api",
)
errors.install(api)
api.add_router("/datasets", datasets.router)
api.add_router("/programs", programs.router)
api.add_router("/runs", runs.router)
api.add_router("/runs", code_runs.router)


def _open(patterns):
    """Each route without the pages' login redirect (its token decides)."""
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            _open(pattern.url_patterns)
        else:
            pattern.callback = login_not_required(pattern.callback)
    return patterns


patterns, app_name, namespace = api.urls
urls = (_open(patterns), app_name, namespace)
