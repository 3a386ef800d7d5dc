"""Login is required on every URL and every WebSocket route; login itself works."""

import re
import uuid

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.urls import URLPattern, URLResolver, get_resolver

# Reachable without login, on purpose: the login form, /healthz for monitors (it only says
# up/down per component; see README "Health check") and /favicon.ico, a redirect to the
# static icon that a browser asks for on the login page too (tests/web/test_favicon.py).
PUBLIC = {"login", "healthz", "favicon", "openapi-json", "openapi-view"}

SAMPLES = {"int": "1", "str": "x", "slug": "x", "uuid": str(uuid.uuid4()), "path": "x/y"}


def _fill_route(route: str) -> str:
    return re.sub(r"<(?:(\w+):)?\w+>", lambda m: SAMPLES.get(m.group(1) or "str", "x"), route)


def _fill_regex(regex: str) -> str:
    regex = re.sub(r"\(\?P<\w+>[^)]*\)", "1", regex)
    return regex.replace("^", "").replace("$", "").replace("\\", "")


def _pattern_text(pattern) -> str:
    raw = str(pattern.pattern)
    if pattern.pattern.__class__.__name__ == "RoutePattern":
        return _fill_route(raw)
    return _fill_regex(raw)


def every_url(resolver=None, prefix="/"):
    """(path, name) for every URL pattern in the project, placeholders filled in."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        text = prefix + _pattern_text(entry)
        if isinstance(entry, URLResolver):
            yield from every_url(entry, text)
        elif isinstance(entry, URLPattern):
            yield text, entry.name


def api_methods(path: str) -> set[str]:
    """The methods the API's schema offers at ``path`` (placeholders filled)."""
    from api.urls import api

    paths = api.get_openapi_schema()["paths"]
    if path in paths:  # /api/programs/import, not /api/programs/{program_id}
        return set(paths[path])
    for template, operations in paths.items():
        if re.fullmatch(re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template)), path):
            return set(operations)
    return set()


def test_url_enumeration_sees_core_pages():
    names = {name for _, name in every_url()}
    assert {"login", "healthz", "settings", "worker-status", "home"} <= names


@pytest.mark.smoke
@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post"])
def test_anonymous_requests_are_refused_everywhere(client, method):
    checked = 0
    for path, name in every_url():
        if name in PUBLIC:
            continue
        response = getattr(client, method)(path)
        if path.startswith("/api/"):  # a token's door: refused as JSON, never redirected
            if not api_methods(path):  # the API's root: nothing there
                assert response.status_code == 404, (method, path)
            elif method in api_methods(path):
                assert response.status_code == 401, (method, path)
                assert response.json()["detail"].startswith("A live personal token is needed")
            else:
                assert response.status_code == 405, (method, path)
            continue
        checked += 1
        assert response.status_code == 302, (
            f"{method.upper()} {path} ({name}) answered {response.status_code}"
        )
        assert response["Location"].startswith("/accounts/login/"), (path, response["Location"])
    assert checked >= 3


@pytest.mark.smoke
@pytest.mark.django_db
def test_anonymous_htmx_request_gets_401_with_hx_redirect(client):
    response = client.get("/status/worker/", headers={"HX-Request": "true"})
    assert response.status_code == 401
    assert response["HX-Redirect"].startswith("/accounts/login/?next=")


@pytest.mark.smoke
@pytest.mark.django_db
def test_login_then_pages_render(client, django_user_model):
    django_user_model.objects.create_user("alice", password="a-long-password-1")
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b'name="password"' in page.content
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "a-long-password-1"}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    home = client.get("/")
    assert home.status_code == 200
    html = home.content.decode()
    for label in ("Datasets", "Programs", "Runs", "Compare", "Settings"):
        assert f">{label}</a>" in html
    assert "django_htmx/htmx-2.min.js" in html and "django_htmx/ext/hx-ws-2.min.js" in html
    assert 'id="worker-status"' in html
    bad = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert bad.status_code == 200 and b"Wrong username or password" in bad.content


def _websocket_paths():
    from tests.support.routing import websocket_urlpatterns as test_ws
    from training.routing import websocket_urlpatterns as training_ws

    return ["/" + _pattern_text(p) for p in [*test_ws, *training_ws]]


@pytest.mark.smoke
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", _websocket_paths())
async def test_anonymous_websocket_is_refused(path):
    from tests.support.asgi import application  # Trainboard's, plus the tests' ws/echo/

    communicator = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    )
    connected, code = await communicator.connect(timeout=5)
    assert not connected
    assert code == 4401
    await communicator.disconnect()


@pytest.mark.smoke
async def test_login_required_consumer_closes_anonymous_scope():
    from tests.support.consumers import EchoConsumer

    communicator = WebsocketCommunicator(EchoConsumer.as_asgi(), "/ws/echo/x/")
    communicator.scope["user"] = AnonymousUser()
    communicator.scope["url_route"] = {"kwargs": {"name": "x"}}
    connected, code = await communicator.connect(timeout=5)
    assert (connected, code) == (False, 4401)
    await communicator.disconnect()  # let the consumer's task end before the loop closes
