"""WebSocket origin check that compares scheme, host and port (same origin, as for CSRF).

Channels' ``AllowedHostsOriginValidator`` compares only the host name with ALLOWED_HOSTS,
so a page served from ``http://127.0.0.1:9999`` (any other program on the machine) could
open ``ws://127.0.0.1:8000/ws/runs/1/`` with the user's cookies and read the run. A
browser always sends ``Origin``; here it must be this site itself, i.e. the scheme of the
socket (ws -> http, wss -> https) with the ``Host`` the request was made to, that host
being an allowed one, or one of CSRF_TRUSTED_ORIGINS (a proxy terminating TLS).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_tuple(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin such as ``http://127.0.0.1:8000``, else None."""
    try:
        parts = urlsplit(url.strip().lower())
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or port is None:
        return None
    return parts.scheme, parts.hostname, port


def own_origin(scope) -> tuple[str, str, int] | None:
    """The origin of the site this socket was opened on (scheme from the socket, Host)."""
    headers = dict(scope.get("headers", []))
    host = headers.get(b"host", b"").decode("latin1")
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    return _origin_tuple(f"{scheme}://{host}")


def origin_allowed(scope) -> bool:
    raw = dict(scope.get("headers", [])).get(b"origin")
    if raw is None:
        return False
    origin = _origin_tuple(raw.decode("latin1"))
    if origin is None:
        return False
    if origin == own_origin(scope):
        return True
    return any(origin == _origin_tuple(trusted) for trusted in settings.CSRF_TRUSTED_ORIGINS)


class SameOriginValidator:
    """ASGI middleware for websocket scopes: closes the handshake unless the origin is ours.

    Args:
        application: the ASGI application to call for an allowed origin.

    Example:
        ``SameOriginValidator(AuthMiddlewareStack(URLRouter(routes)))``
    """

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
