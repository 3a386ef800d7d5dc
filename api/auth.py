"""Bearer authentication with personal tokens, and a budget of requests per token."""

from __future__ import annotations

from django.conf import settings
from ninja.security import HttpBearer
from ninja.throttling import AuthRateThrottle

from api import tokens


class TokenAuth(HttpBearer):
    """``Authorization: Bearer tb_...``: the request acts as the token's owner."""

    def authenticate(self, request, token):
        stored = tokens.authenticate(token)
        if stored is not None:
            request.user = stored.owner  # what the pages' selectors and services are given
        return stored


class TokenRateThrottle(AuthRateThrottle):
    """Requests per token (``TRAINBOARD_API_RATE``, e.g. ``120/min``), counted in each
    process's cache; the rate is read at each request, so a changed setting holds at once."""

    setting = "TRAINBOARD_API_RATE"

    def __init__(self):
        super().__init__(getattr(settings, self.setting))

    def allow_request(self, request) -> bool:
        self.rate = getattr(settings, self.setting)
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request)


class StreamRateThrottle(TokenRateThrottle):
    """The posts of a fit streamed from code (``TRAINBOARD_API_STREAM_RATE``), counted apart:
    a monitor posts about twice a second, which must not use up its token's budget for
    every other call (and the other calls must not stall the stream)."""

    scope = "stream"
    setting = "TRAINBOARD_API_STREAM_RATE"


def throttles() -> list[AuthRateThrottle]:
    return [TokenRateThrottle()]
