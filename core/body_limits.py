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
request that carries a session cookie, and TRAINBOARD_ANONYMOUS_BODY_MAX_BYTES for one
that does not (nobody logged out needs more than a log-in form). Whether the session is
valid is Django's business later; a proxy in front (README) can still cap bodies earlier.

``install()`` (called by project.asgi, which daphne imports before it starts listening)
makes daphne build LimitedWebRequest for each request.
"""

from __future__ import annotations

import io
import logging

from daphne import http_protocol
from django.conf import settings

from datasets.upload_handler import MULTIPART_SLACK

logger = logging.getLogger(__name__)


def body_limit(has_session_cookie: bool) -> int:
    """Most body bytes accepted for a request, by whether it carries a session cookie."""
    if has_session_cookie:
        return settings.TRAINBOARD_UPLOAD_MAX_BYTES + MULTIPART_SLACK
    return settings.TRAINBOARD_ANONYMOUS_BODY_MAX_BYTES


def refusal_message(limit: int, has_session_cookie: bool) -> str:
    if has_session_cookie:
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
        self.has_session_cookie = settings.SESSION_COOKIE_NAME.encode() in self.received_cookies
        self.body_limit = body_limit(self.has_session_cookie)
        self.body_received = 0
        if length is not None and length > self.body_limit:
            self.content = io.BytesIO()
            self.refuse_body(length)
            return
        super().gotLength(length)

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
        body = refusal_message(self.body_limit, self.has_session_cookie).encode()
        logger.warning(
            "Refused a %s body of %s bytes for %s (limit %s bytes, %s)",
            self.method.decode("latin1", "replace"),
            length if length is not None else f"more than {self.body_limit}",
            self.uri.decode("latin1", "replace")[:200],
            self.body_limit,
            "session cookie" if self.has_session_cookie else "anonymous",
        )
        head = (
            "HTTP/1.1 413 Content Too Large\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        self.channel.transport.write(head + body)
        self.channel.loseConnection()


def install() -> None:
    """Make daphne's HTTP factory build LimitedWebRequest (it looks the name up per
    connection in daphne.http_protocol)."""
    http_protocol.WebRequest = LimitedWebRequest
