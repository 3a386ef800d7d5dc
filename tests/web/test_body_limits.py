"""Request bodies are refused by size before they are read (18.7), against the live stack:
daphne itself answers 413 as soon as the headers say the body is too large (or, without a
Content-Length, as soon as too many bytes arrived), and closes the connection.
"""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import requests
from django.conf import settings

from core import body_pass
from datasets.upload_handler import MULTIPART_SLACK

MB = 1024 * 1024


def logged_in(live_stack) -> requests.Session:
    """A session logged in through the login form, its cookies kept (CSRF's included)."""
    session = requests.Session()
    session.get(live_stack.url + "accounts/login/", timeout=10)
    response = session.post(
        live_stack.url + "accounts/login/",
        data={
            "username": live_stack.username,
            "password": live_stack.password,
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        headers={"Referer": live_stack.url + "accounts/login/"},
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 302, response.text[:300]
    return session


def live_session(live_stack) -> str:
    """Log in through the login form; return the ``Cookie`` header it earned (the session
    and the body pass that comes with it)."""
    with logged_in(live_stack) as session:
        return "; ".join(
            f"{name}={session.cookies[name]}"
            for name in (settings.SESSION_COOKIE_NAME, body_pass.BODY_PASS_COOKIE)
        )


def raw_post(live_stack, path: str, headers: dict, body_bytes: int = 0, chunked=False):
    """Send a POST head (and up to ``body_bytes`` of body); return (status line, text,
    seconds until the answer, body bytes the server let us send)."""
    parts = urlsplit(live_stack.url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    head = f"POST {path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    started = time.perf_counter()
    sock.sendall(head.encode())
    sent = 0
    piece = b"x" * 65536
    try:
        while sent < body_bytes:
            data = piece[: min(len(piece), body_bytes - sent)]
            if chunked:
                data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
            sock.sendall(data)
            sent += min(len(piece), body_bytes - sent)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server closed: exactly what a refusal does
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    elapsed = time.perf_counter() - started
    sock.close()
    status, _, rest = answer.decode("utf-8", "replace").partition("\r\n")
    return status, rest, elapsed, sent


def test_anonymous_300_mb_content_length_is_refused_before_the_body(live_stack):
    status, text, elapsed, _ = raw_post(
        live_stack,
        "/accounts/login/",
        {"Content-Length": str(300 * MB), "Content-Type": "application/x-www-form-urlencoded"},
    )
    print(f"300 MB Content-Length (anonymous): 413 after {elapsed * 1000:.0f} ms, 0 body bytes")
    assert status == "HTTP/1.1 413 Content Too Large"
    assert "not logged in may carry at most" in text
    assert elapsed < 5  # answered on the headers alone: no body was sent at all


def test_logged_in_upload_over_the_limit_is_refused_before_the_body(live_stack):
    cookie = live_session(live_stack)
    status, text, elapsed, _ = raw_post(
        live_stack,
        "/datasets/upload/",
        {
            "Content-Length": str(250 * MB),
            "Content-Type": "multipart/form-data; boundary=xyz",
            "Cookie": cookie,
        },
    )
    print(f"250 MB upload (logged in): 413 after {elapsed * 1000:.0f} ms, 0 body bytes")
    assert status == "HTTP/1.1 413 Content Too Large"
    assert "upload limit of 200 MB" in text


def test_a_made_up_session_cookie_keeps_the_anonymous_limit(live_stack):
    status, text, _, _ = raw_post(
        live_stack,
        "/datasets/upload/",
        {
            "Content-Length": str(1 * MB),
            "Content-Type": "multipart/form-data; boundary=xyz",
            "Cookie": f"{settings.SESSION_COOKIE_NAME}=made-up-{'x' * 24}",
        },
    )
    assert status == "HTTP/1.1 413 Content Too Large"
    assert "not logged in may carry at most" in text


def test_a_pass_from_another_session_keeps_the_anonymous_limit(live_stack):
    earned = dict(part.split("=", 1) for part in live_session(live_stack).split("; "))
    status, text, _, _ = raw_post(
        live_stack,
        "/datasets/upload/",
        {
            "Content-Length": str(1 * MB),
            "Content-Type": "multipart/form-data; boundary=xyz",
            "Cookie": f"{settings.SESSION_COOKIE_NAME}=another-{'y' * 24}; "
            f"{body_pass.BODY_PASS_COOKIE}={earned[body_pass.BODY_PASS_COOKIE]}",
        },
    )
    assert status == "HTTP/1.1 413 Content Too Large"
    assert "not logged in may carry at most" in text


def test_anonymous_chunked_body_is_cut_at_the_limit(live_stack):
    status, text, elapsed, sent = raw_post(
        live_stack,
        "/accounts/login/",
        {"Transfer-Encoding": "chunked", "Content-Type": "application/x-www-form-urlencoded"},
        body_bytes=50 * MB,
        chunked=True,
    )
    print(f"chunked anonymous body: 413 after {sent:,} bytes sent, {elapsed * 1000:.0f} ms")
    assert status == "HTTP/1.1 413 Content Too Large"
    assert sent < 10 * MB  # the server stopped reading long before 50 MB


def test_a_body_within_the_limits_still_works(live_stack):
    limit = settings.TRAINBOARD_UPLOAD_MAX_BYTES + MULTIPART_SLACK
    assert limit > settings.TRAINBOARD_ANONYMOUS_BODY_MAX_BYTES
    response = requests.post(
        live_stack.url + "accounts/login/", data={"username": "x", "password": "y"}, timeout=10
    )
    assert response.status_code == 403  # CSRF, i.e. Django saw the request
