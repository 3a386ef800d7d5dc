"""One client's flood of requests cannot stall everyone else's pages.

Why: the web server runs each request's Django code in a thread of its own. 200 page loads
fired at once by one user made 200 threads share two cores and the database, and another
user's page took 10.9 s instead of 0.3 s. A browser never has more than 6 requests in flight
to one site (HTTP/1.1), so a client with more than ``TRAINBOARD_REQUESTS_IN_FLIGHT`` (8) at
once is a script or a flood: the excess is answered ``429`` at once, in the event loop,
before any Django code or database work, and the client's own requests already running go
on.

A client is a logged-in member's session when its signed body pass names it
(``body_pass.py``: a made-up cookie per request gains nothing), else its address.
``/healthz`` is left out: monitors and load balancers share an address, and its answer is
computed once for all concurrent askers (``core.health``), so it costs a flood nothing.
"""

from __future__ import annotations

import threading
from collections import Counter

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpResponse

from core import body_pass

#: Paths every client may ask as often as it likes (cheap and shared: see above).
UNBOUNDED_PATHS = frozenset({"/healthz"})


def client_key(request) -> str:
    session = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if body_pass.names_session(request.COOKIES.get(body_pass.BODY_PASS_COOKIE), session):
        return f"session:{session}"
    return f"address:{request.META.get('REMOTE_ADDR', '')}"


class FairShareMiddleware:
    """Answers 429 to a client's requests beyond ``TRAINBOARD_REQUESTS_IN_FLIGHT`` at once."""

    async_capable = True
    sync_capable = False

    def __init__(self, get_response):
        self.get_response = get_response
        self.in_flight: Counter[str] = Counter()
        self.lock = threading.Lock()
        if iscoroutinefunction(self.get_response):
            markcoroutinefunction(self)

    async def __call__(self, request):
        if request.path in UNBOUNDED_PATHS:
            return await self.get_response(request)
        key = client_key(request)
        limit = settings.TRAINBOARD_REQUESTS_IN_FLIGHT
        with self.lock:
            if self.in_flight[key] >= limit:
                return too_many(limit)
            self.in_flight[key] += 1
        try:
            return await self.get_response(request)
        finally:
            with self.lock:
                self.in_flight[key] -= 1
                if self.in_flight[key] <= 0:
                    del self.in_flight[key]


def too_many(limit: int) -> HttpResponse:
    response = HttpResponse(
        f"Too many requests at once from you ({limit} are in progress). Try again in a moment.\n",
        status=429,
        content_type="text/plain; charset=utf-8",
    )
    response["Retry-After"] = "1"
    return response
