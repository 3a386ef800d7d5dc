"""What the test stack's daphne serves: Trainboard's ASGI application with ws/echo/ added.

The echo route is inserted into the application's own WebSocket router, so it sits behind
exactly the same origin check, session authentication and no-route fallback as the
application's routes. Only the test stack (and tests) import this module; ``make run``
serves ``project.asgi:application``, which has no echo route.
"""

from channels.routing import URLRouter

from project.asgi import application
from tests.support.routing import websocket_urlpatterns


def _websocket_router(app) -> URLRouter:
    """The URLRouter under the WebSocket middleware (validators store ``application``,
    channels middleware ``inner``)."""
    app = app.application_mapping["websocket"]
    while not isinstance(app, URLRouter):
        app = getattr(app, "inner", None) or app.application
    return app


_router = _websocket_router(application)
if websocket_urlpatterns[0] not in _router.routes:
    _router.routes[:0] = websocket_urlpatterns

__all__ = ["application"]
