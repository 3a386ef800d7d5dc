"""A real HTTP listener on loopback that answers like an OpenAI-compatible (and Ollama) server
and records every request's path and headers, for the tests of what leaves for an endpoint."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = json.dumps({"answer": "ok"})


def _body(path: str) -> dict:
    if path.startswith("/api/embed"):
        return {"model": "m", "embeddings": [[0.1, 0.2, 0.3]]}
    if "embeddings" in path:
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]}],
            "model": "m",
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
    if path.startswith("/api/chat"):
        return {
            "model": "m",
            "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": ANSWER},
            "done": True,
            "prompt_eval_count": 1,
            "eval_count": 1,
        }
    if path.startswith("/api/generate"):
        return {
            "model": "m",
            "created_at": "2026-01-01T00:00:00Z",
            "response": ANSWER,
            "done": True,
            "prompt_eval_count": 1,
            "eval_count": 1,
        }
    if path.startswith("/api/show"):
        return {"modelfile": "", "parameters": "", "template": "", "details": {}, "model_info": {}}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class RecordingListener:
    """``with RecordingListener() as listener:`` serves on ``listener.url`` (127.0.0.1, a free
    port); ``listener.requests`` holds ``(path, {header: value})`` of every request, ``listener.bodies``
    the POST bodies."""

    def __init__(self):
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.bodies: list[bytes] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                listener.bodies.append(
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                )
                listener.requests.append(
                    (self.path, {k.lower(): v for k, v in self.headers.items()})
                )
                self._answer(_body(self.path))

            def do_GET(self):
                listener.requests.append(
                    (self.path, {k.lower(): v for k, v in self.headers.items()})
                )
                self._answer({"object": "list", "data": [{"id": "m", "object": "model"}]})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_port
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> RecordingListener:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
