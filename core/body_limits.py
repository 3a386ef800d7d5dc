"""Request bodies are refused by size before they are read, in daphne itself.

Why in the server and not in Django or an ASGI middleware: daphne (Twisted) reads a whole
request body, spooling it to a temporary file past 100 kB, before it calls the ASGI
application at all. A 300 MB POST was written to /tmp before Django's 403, and a 250 MB
upload got its 413 only after all of it arrived. Here, as soon as the headers are in:

* a ``Content-Length`` over the limit is answered ``413`` at once and the connection is
  closed: not one byte of the body is read;
* without ``Content-Length`` (chunked), bytes are counted as they arrive and the same
  answer is given at the first byte past the limit.

The limit: TRAINBOARD_UPLOAD_MAX_BYTES (plus the multipart framing around the file) for a
request of a logged-in member, and TRAINBOARD_ANONYMOUS_BODY_MAX_BYTES for any other
(nobody logged out needs more than a log-in form). A member is told by the signed pass that
names the request's session cookie (``body_pass.py``), or by an API token this server signed
(``token_signing.py``), both checked here without the database; a
proxy in front (README) can still cap bodies earlier.

``install()`` (called by project.asgi, which daphne imports before it starts listening)
makes daphne build LimitedWebRequest for each request.
"""

from __future__ import annotations

import io
import logging
import re

from daphne import http_protocol
from django.conf import settings

from core import body_pass, token_signing
from datasets.upload_handler import MULTIPART_SLACK

logger = logging.getLogger(__name__)


#: The API routes that take files or a fit's stream: only these lift the limit for a signed
#: token (a run's events: ``/api/runs/<id>/events``).
UPLOAD_PATHS = (b"/api/datasets/", b"/api/programs/import", b"/api/runs/from-code")
EVENTS_PATH = re.compile(rb"/api/runs/\d{1,12}/events")
#: Most bytes a fit's stream posts at once (its route reads 2 MiB: a little framing more).
STREAM_MAX_BYTES = 2 * 1024 * 1024 + 64 * 1024


def body_limit(is_member: bool) -> int:
    """Most body bytes accepted for a request, by whether a logged-in member sent it."""
    if is_member:
        return settings.TRAINBOARD_UPLOAD_MAX_BYTES + MULTIPART_SLACK
    return settings.TRAINBOARD_ANONYMOUS_BODY_MAX_BYTES


def refusal_message(limit: int, is_member: bool) -> str:
    if is_member:
        return (
            f"The request is larger than the upload limit of {limit / 1024 / 1024:.0f} MB "
            "(TRAINBOARD_UPLOAD_MAX_BYTES). Nothing was saved.\n"
        )
    return (
        f"Requests of visitors who are not logged in may carry at most {limit:,} bytes. "
        "Log in first.\n"
    )


class LimitedWebRequest(http_protocol.WebRequest):
    """daphne's request, refusing an over-limit body (413) before reading it.

    Twisted calls ``gotLength`` once the headers are parsed (cookies included) and
    ``handleContentChunk`` for each piece of body; ``process`` (which hands the request to
    the ASGI application) only after the whole body arrived, so it is skipped once refused.
    """

    body_refused = False

    def gotLength(self, length):
        self.is_member = (
            body_pass.names_session(
                _cookie(self.received_cookies, body_pass.BODY_PASS_COOKIE),
                _cookie(self.received_cookies, settings.SESSION_COOKIE_NAME),
            )
            or self._signed_token()
        )
        self.body_limit = body_limit(self.is_member)
        if self.is_member and self._stream_path():  # a fit's stream: what its route reads
            self.body_limit = min(self.body_limit, STREAM_MAX_BYTES)
        self.body_received = 0
        if length is not None and length > self.body_limit:
            self.content = io.BytesIO()
            self.refuse_body(length)
            return
        super().gotLength(length)

    def _stream_path(self) -> bool:
        path = (getattr(self.channel, "_path", b"") or b"").split(b"?", 1)[0]
        return path == b"/api/runs/from-code" or bool(EVENTS_PATH.fullmatch(path))

    def _signed_token(self) -> bool:
        """Whether the request is an API upload carrying a token this server signed (a
        script's pass). Only the upload routes: a revoked token, recognised here without
        the database, can then at most send an upload that the API refuses."""
        # the request line's path: Twisted sets ``self.path`` only once the body is in
        path = getattr(self.channel, "_path", b"") or b""
        path = path.split(b"?", 1)[0]
        if path not in UPLOAD_PATHS and not EVENTS_PATH.fullmatch(path):
            return False
        values = self.requestHeaders.getRawHeaders(b"authorization") or []
        header = values[0].decode("latin-1") if values else None
        return token_signing.token_id(token_signing.bearer(header)) is not None

    def handleContentChunk(self, data):
        if self.body_refused:
            return
        self.body_received += len(data)
        if self.body_received > self.body_limit:
            self.refuse_body(None)
            return
        super().handleContentChunk(data)

    def process(self):
        if self.body_refused:
            return None
        return super().process()

    def refuse_body(self, length: int | None) -> None:
        """Answer 413 and close: the rest of the body is never read."""
        self.body_refused = True
        body = refusal_message(self.body_limit, self.is_member).encode()
        logger.warning(
            "Refused a %s body of %s bytes for %s (limit %s bytes, %s)",
            self.method.decode("latin1", "replace"),
            length if length is not None else f"more than {self.body_limit}",
            self.uri.decode("latin1", "replace")[:200],
            self.body_limit,
            "member" if self.is_member else "anonymous",
        )
        head = (
            "HTTP/1.1 413 Content Too Large\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        self.channel.transport.write(head + body)
        self.channel.loseConnection()


def _cookie(cookies: dict[bytes, bytes], name: str) -> str | None:
    value = cookies.get(name.encode())
    return value.decode("latin1") if value is not None else None


def install() -> None:
    """Make daphne's HTTP factory build LimitedWebRequest (it looks the name up per
    connection in daphne.http_protocol)."""
    http_protocol.WebRequest = LimitedWebRequest
