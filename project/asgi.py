"""ASGI entry point served by daphne: HTTP through Django, WebSockets through Channels.

WebSockets pass the allowed-hosts origin check and the session auth middleware; every
consumer then refuses anonymous users itself (see core.consumers).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

django_asgi_app = get_asgi_application()

# Imported after Django is set up: consumers import models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from core.routing import websocket_urlpatterns as core_ws  # noqa: E402
from training.routing import websocket_urlpatterns as training_ws  # noqa: E402

http_app = ASGIStaticFilesHandler(django_asgi_app) if settings.SERVE_STATIC else django_asgi_app

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter([*core_ws, *training_ws]))
        ),
    }
)
