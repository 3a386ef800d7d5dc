"""WebSocket handshakes: the origin must be this site (scheme, host and port: 18.9), and a
path no route matches is refused instead of failing with a 500 (18.11)."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from tests.training.conftest import _close_executor_connection

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
async def _no_connection_left_in_the_orm_thread():
    """The session and the auth middleware use sync_to_async's ORM thread: leave no open
    connection there for a later test without database access."""
    yield
    await sync_to_async(_close_executor_connection)()


@sync_to_async
def session_cookie() -> bytes:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("wsuser", password="a-long-password-8")
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


async def handshake(path: str, origin: bytes | None, cookie: bytes = b"", host=b"127.0.0.1:8000"):
    from tests.support.asgi import application  # Trainboard's, plus the tests' ws/echo/

    headers = [(b"host", host)]
    if origin is not None:
        headers.append((b"origin", origin))
    if cookie:
        headers.append((b"cookie", cookie))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect(timeout=5)
    await communicator.disconnect()
    return connected, code


async def test_same_origin_socket_opens_for_its_user():
    cookie = await session_cookie()
    assert (await handshake("/ws/echo/x/", b"http://127.0.0.1:8000", cookie))[0] is True


@pytest.mark.parametrize(
    "origin",
    [
        b"http://127.0.0.1:9999",  # another program on the same machine
        b"https://127.0.0.1:8000",  # another scheme
        b"http://localhost:8000",  # another host name
        b"http://127.0.0.1",  # port 80
        b"null",
        None,
    ],
)
async def test_another_origin_cannot_open_the_users_socket(origin):
    cookie = await session_cookie()
    connected, code = await handshake("/ws/echo/x/", origin, cookie)
    assert connected is False and code != 4401  # refused before any consumer ran


async def test_a_trusted_proxy_origin_is_accepted(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://trainboard.example.org"]
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "trainboard.example.org"]
    cookie = await session_cookie()
    connected, _ = await handshake(
        "/ws/echo/x/", b"https://trainboard.example.org", cookie, host=b"trainboard.example.org"
    )
    assert connected is True


@pytest.mark.parametrize("path", ["/ws/runs/abc/", "/ws/nothing/", "/ws/echo/"])
async def test_a_path_without_route_is_refused_at_the_handshake(path):
    cookie = await session_cookie()
    connected, code = await handshake(path, b"http://127.0.0.1:8000", cookie)
    assert connected is False and code == 1000
