"""ASGI entry point served by daphne: HTTP through Django, WebSockets through Channels.

WebSockets pass the same-origin check (scheme, host and port: core.ws_origin) and the
session auth middleware; every consumer then refuses anonymous users itself (see
core.consumers). A path no route matches is refused at the handshake (NoRouteConsumer).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

django_asgi_app = get_asgi_application()

# Imported after Django is set up: consumers import models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.urls import re_path  # noqa: E402

from core import access_log, body_limits  # noqa: E402
from core.consumers import NoRouteConsumer  # noqa: E402
from core.ws_origin import SameOriginValidator  # noqa: E402
from training.routing import websocket_urlpatterns as training_ws  # noqa: E402

body_limits.install()  # daphne refuses over-limit bodies before reading them
access_log.install()  # daphne's request lines through logging: time and level
http_app = ASGIStaticFilesHandler(django_asgi_app) if settings.SERVE_STATIC else django_asgi_app

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": SameOriginValidator(
            AuthMiddlewareStack(URLRouter([*training_ws, re_path(r"", NoRouteConsumer.as_asgi())]))
        ),
    }
)
