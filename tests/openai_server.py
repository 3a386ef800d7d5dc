"""A real OpenAI-compatible HTTP server for tests: ``POST /v1/chat/completions`` on loopback.

It answers like a provider with a concurrency limit: while ``limit`` requests are already in
flight, the next one gets ``429 Too Many Requests`` with a ``Retry-After`` header; the others
wait ``latency`` seconds (so requests overlap) and answer ``content``. It records the most
requests it saw in flight at once (``max_in_flight``), every answered request and every 429,
with their times, so a test checks what really arrived over HTTP.

Example:
    ```python
    with OpenAIServer(limit=3, latency=0.2, content='{"team": "money"}') as server:
        lm = LanguageModel("openai/test-model", api_base=server.api_base)
        ...
        assert server.max_in_flight <= 3
    ```
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OpenAIServer:
    """The server, started on a free loopback port; a context manager.

    Args:
        limit: requests in flight past which it answers 429.
        latency: seconds each answered request takes.
        content: the assistant message's text.
        retry_after: the 429's ``Retry-After`` (seconds).
        logprobs: the answer's ``logprobs.content`` (OpenAI's per-token log-probabilities),
            returned when a request asks for ``logprobs``; None: never returned.
        refuse_logprobs: answer a request that asks for ``logprobs`` with a 400, as a
            gateway that does not take the parameter does.
    """

    def __init__(
        self,
        limit: int,
        latency: float,
        content: str,
        retry_after: float = 1.0,
        logprobs: list[dict] | None = None,
        refuse_logprobs: bool = False,
    ):
        self.limit, self.latency, self.content = limit, latency, content
        self.retry_after = retry_after
        #: the answer's per-token log-probabilities, sent when a request asks for them
        self.logprobs = logprobs
        self.refuse_logprobs = refuse_logprobs
        self.bodies: list[dict] = []  # every request's JSON body
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.answered: list[float] = []  # monotonic times the answered requests arrived
        self.refused: list[float] = []  # monotonic times of the 429s
        self.arrivals: list[float] = []  # every request's arrival
        self.arrived = threading.Event()  # set by the first request's arrival
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> OpenAIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                if server.refuse_logprobs and request.get("logprobs"):
                    with server.lock:
                        server.bodies.append(request)
                    message = "Unsupported parameter: 'logprobs'"
                    self._send(400, {"error": {"message": message, "type": "invalid_request"}})
                    return
                now = time.monotonic()
                with server.lock:
                    server.bodies.append(request)
                    server.arrivals.append(now)
                    server.arrived.set()
                    if server.in_flight >= server.limit:
                        server.refused.append(now)
                        refused = True
                    else:
                        refused = False
                        server.in_flight += 1
                        server.max_in_flight = max(server.max_in_flight, server.in_flight)
                        server.answered.append(now)
                if refused:
                    self._send(
                        429,
                        {"error": {"message": "Too many requests", "type": "rate_limit"}},
                        {"Retry-After": f"{server.retry_after:g}"},
                    )
                    return
                try:
                    time.sleep(server.latency)
                    answer = _completion(request, server.content)
                    if request.get("logprobs") and server.logprobs is not None:
                        answer["choices"][0]["logprobs"] = {"content": server.logprobs}
                finally:
                    # Out of the count before the answer is written: a client that reads it
                    # may send its next request before this thread runs again, and that one
                    # must not meet a request already answered (a 429 the provider's real
                    # count would not give).
                    with server.lock:
                        server.in_flight -= 1
                self._send(200, answer)

        return Handler


def _completion(request: dict, content: str) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "test-model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }
