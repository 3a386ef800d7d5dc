"""The cookie that lets a logged-in member's requests carry an upload-sized body.

Why a cookie of its own: daphne decides a request's body limit as soon as its headers are in
(``body_limits.py``), in the server's event loop, where the session store (a database) must
not be queried. Any ``sessionid`` cookie, made up or expired, would otherwise lift the
anonymous limit. So each response to a logged-in member carries ``BODY_PASS_COOKIE``: the
session key signed with the secret key (Django's ``signing``, timestamped). The server checks
the signature and that it names the request's own session cookie: no database, no guess.
Logging out or in gives the session a new key, which the old pass does not name; the pass
expires with the session (``SESSION_COOKIE_AGE``).
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing

BODY_PASS_COOKIE = "trainboard_body_pass"
_SALT = "trainboard.body-pass"


def issue(session_key: str) -> str:
    """The pass for ``session_key``."""
    return signing.TimestampSigner(salt=_SALT).sign(session_key)


def names_session(token: str | None, session_key: str | None) -> bool:
    """Whether ``token`` is a pass this server signed for ``session_key``, not expired."""
    if not token or not session_key:
        return False
    try:
        signed = signing.TimestampSigner(salt=_SALT).unsign(
            token, max_age=settings.SESSION_COOKIE_AGE
        )
    except signing.BadSignature:  # SignatureExpired is one
        return False
    return signed == session_key


class BodyPassMiddleware:
    """Gives a logged-in member's response the pass for its session; takes it back from
    anyone else."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        user = getattr(request, "user", None)
        session = getattr(request, "session", None)
        key = session.session_key if session is not None else None
        held = request.COOKIES.get(BODY_PASS_COOKIE)
        if user is not None and user.is_authenticated and key:
            if not names_session(held, key):
                response.set_cookie(
                    BODY_PASS_COOKIE,
                    issue(key),
                    max_age=settings.SESSION_COOKIE_AGE,
                    secure=settings.SESSION_COOKIE_SECURE,
                    httponly=True,
                    samesite=settings.SESSION_COOKIE_SAMESITE,
                )
        elif held:
            response.delete_cookie(BODY_PASS_COOKIE, samesite=settings.SESSION_COOKIE_SAMESITE)
        return response
