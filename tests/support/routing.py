"""The test stack's extra WebSocket route: ws/echo/<name>/ (see tests.support.asgi)."""

from django.urls import re_path

from tests.support.consumers import EchoConsumer

websocket_urlpatterns = [
    re_path(r"^ws/echo/(?P<name>[A-Za-z0-9_-]{1,50})/$", EchoConsumer.as_asgi()),
]
