"""The litellm custom provider `local`: routes `local/smollm2` and `local/minilm` in-process.

Every layer above calls `litellm.acompletion` / `litellm.aembedding` the same way for local and
remote models; this class is what litellm dispatches to for the `local/` prefix. It translates
OpenAI-style arguments to the in-process runtimes, runs the blocking work in a worker thread,
and fills litellm's ModelResponse / EmbeddingResponse with usage just like a remote provider.
Errors come out as litellm exceptions (BadRequestError, NotFoundError,
ContextWindowExceededError) whose message says what is wrong and how to fix it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.llms.custom_llm import CustomLLMError

from trainboard_local import minilm, smollm2
from trainboard_local.errors import LocalModelError, unknown_model
from trainboard_local.lazy_call import LazyCall
from training.engine.language_models.label_scoring import Scored
from training.engine.language_models.limits.concurrency import semaphore
from training.engine.language_models.offline import PREFIX as PROVIDER

CHAT_MODELS = {"smollm2": smollm2.MODEL_NAME}
EMBEDDING_MODELS = {"minilm": minilm.MODEL_NAME}


def _short_name(model: str) -> str:
    """litellm strips the provider prefix, but accept 'local/smollm2' too."""
    prefix = PROVIDER + "/"
    return model[len(prefix) :] if model.startswith(prefix) else model


def _as_litellm_error(error: LocalModelError, status_code: int = 400) -> CustomLLMError:
    """litellm maps CustomLLMError by status: 400 → BadRequestError, 404 → NotFoundError."""
    return CustomLLMError(status_code=status_code, message=str(error))


def _text_content(content: Any) -> str:
    """Flatten OpenAI content parts ([{"type": "text", "text": ...}]) to the plain string
    the GGUF chat template expects; non-text parts cannot be read by a text-only model."""
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append(part.get("text", ""))
        elif isinstance(part, str):
            parts.append(part)
        else:
            raise LocalModelError(
                f"{smollm2.MODEL_NAME} reads text only; got a content part {part!r:.80}"
            )
    return "".join(parts)


def _chat_messages(messages: list[dict]) -> list[dict]:
    """Keep role + text: tool calls, names and images are not something a 135M model does."""
    return [{"role": m["role"], "content": _text_content(m.get("content"))} for m in messages]


def _chat_kwargs(optional_params: dict) -> dict:
    """The OpenAI parameters llama.cpp honours; max_completion_tokens is max_tokens' new name."""
    max_tokens = optional_params.get("max_tokens") or optional_params.get("max_completion_tokens")
    return {
        "temperature": optional_params.get("temperature"),
        "max_tokens": max_tokens,
        "seed": optional_params.get("seed"),
        "top_p": optional_params.get("top_p"),
        "stop": optional_params.get("stop"),
        "response_format": optional_params.get("response_format"),
    }


def _fill_model_response(model_response: Any, result: dict) -> Any:
    """Copy llama.cpp's OpenAI-shaped answer into litellm's ModelResponse (content + usage)."""
    choice = result["choices"][0]
    model_response.choices[0].message.content = choice["message"].get("content") or ""
    model_response.choices[0].finish_reason = choice.get("finish_reason") or "stop"
    model_response.created = int(time.time())
    model_response.model = smollm2.MODEL_NAME
    usage = result.get("usage") or {}
    prompt = int(usage.get("prompt_tokens", 0))
    completion = int(usage.get("completion_tokens", 0))
    model_response.usage = litellm.Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )
    return model_response


def _fill_embedding_response(model_response: Any, vectors: list, tokens: int) -> Any:
    model_response.model = minilm.MODEL_NAME
    model_response.object = "list"
    model_response.data = [
        {"object": "embedding", "index": i, "embedding": vector} for i, vector in enumerate(vectors)
    ]
    model_response.usage = litellm.Usage(
        prompt_tokens=tokens, completion_tokens=0, total_tokens=tokens
    )
    return model_response


def _run_chat(
    model: str, messages: list, optional_params: dict, cancelled: threading.Event | None = None
) -> dict:
    """Blocking: validate the name, then generate. Raises litellm-mappable errors."""
    return _on_chat_model(
        model,
        lambda: smollm2.complete(
            _chat_messages(messages), cancelled=cancelled, **_chat_kwargs(optional_params)
        ),
    )


def _on_chat_model(model: str, work: Any) -> Any:
    """``work()`` once ``model`` names a local chat model, its errors as litellm's: an unknown
    name is a 404, a prompt past the context window litellm's own error for it."""
    if _short_name(model) not in CHAT_MODELS:
        raise _as_litellm_error(unknown_model(f"{PROVIDER}/{_short_name(model)}", "chat"), 404)
    try:
        return work()
    except LocalModelError as error:
        raise _as_litellm_error(error) from error
    except ValueError as error:
        if "context window" in str(error):
            raise litellm.ContextWindowExceededError(
                message=f"{smollm2.MODEL_NAME}: {error}",
                model=smollm2.MODEL_NAME,
                llm_provider=PROVIDER,
            ) from error
        raise


class CoreHandoff:
    """The core slots an async chat call took, handed to its worker thread.

    Exactly one side gives them back: the worker thread when it runs the call, or the awaiting
    coroutine when it is cancelled (Cancel, an attempt's deadline) before the thread started —
    a job still queued for a free thread of the executor would otherwise never run its
    ``finally`` and hold the machine's cores for every worker process. ``cancelled`` also
    stops a generation already under way at its next token.

    Args:
        slots: The machine's ``CoreSlots`` (None when they are off).
        taken: The slot numbers taken for this call.
    """

    def __init__(self, slots: Any, taken: list[int]):
        self.slots = slots
        self.taken = taken
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self._claimed = False

    def claim(self) -> bool:
        """True for the first side to ask: that side gives the slots back."""
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def give_back(self) -> None:
        if self.slots:
            self.slots.give_back_all(self.taken)


def _run_on_cores(handoff: CoreHandoff, work: Any, *args: Any) -> dict | None:
    """``work(*args, cancelled=...)`` on the cores ``handoff`` holds, then give them back;
    None (nothing run) when the awaiting call was cancelled before this thread started."""
    if not handoff.claim():
        return None
    try:
        return work(*args, cancelled=handoff.cancelled)
    finally:
        handoff.give_back()


async def _on_a_free_instance(work: Any, *args: Any) -> dict:
    """``work(*args, cancelled=...)`` (blocking) in a worker thread, once a Llama instance and
    the machine's cores for it are free.

    Both waits happen here, where they can be cancelled, not in the worker thread, where they
    cannot: an interrupted run would leave every queued call to run to its end before the
    worker is free; and the other worker process's run may be decoding on the cores
    (``core_slots.py``)."""
    async with semaphore(("local-chat-instances",), smollm2.instance_count()):
        slots = smollm2.core_slots()
        waited = time.perf_counter()
        taken = await slots.take_async(smollm2.threads_per_instance()) if slots else []
        smollm2.add_core_wait(time.perf_counter() - waited)
        handoff = CoreHandoff(slots, taken)
        try:
            return await asyncio.to_thread(_run_on_cores, handoff, work, *args)
        except asyncio.CancelledError:
            handoff.cancelled.set()
            if handoff.claim():  # the thread never started: give the cores back here
                handoff.give_back()
            raise


def _run_scoring(
    model: str,
    messages: list,
    opening: str,
    continuations: list,
    cancelled: threading.Event | None = None,
) -> dict:
    """Blocking: validate the name, then score (``smollm2.score``)."""
    return _on_chat_model(
        model,
        lambda: smollm2.score(
            _chat_messages(messages), opening, continuations, cancelled=cancelled
        ),
    )


async def score_labels(
    model: str, messages: list, opening: str, continuations: list, timeout: float | None
) -> Scored:
    """The label scorer of ``local/`` models (``label_scoring.register_scorer``): each
    continuation's log-probability after the prompt and ``opening``, on a free instance."""
    result = await _on_a_free_instance(_run_scoring, model, messages, opening, continuations)
    usage = result.get("usage") or {}
    return Scored(
        scores=list(result["scores"]),
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
    )


def _run_embedding(model: str, texts: Any) -> tuple[list, int]:
    if _short_name(model) not in EMBEDDING_MODELS:
        raise _as_litellm_error(unknown_model(f"{PROVIDER}/{_short_name(model)}", "embedding"), 404)
    try:
        return minilm.embed(texts)
    except LocalModelError as error:
        raise _as_litellm_error(error) from error


class LocalProvider(CustomLLM):
    """litellm handler for `local/…` models (registered by `trainboard_local`).

    litellm (pinned in requirements.txt) calls these four methods with keyword arguments only,
    so each names just what it reads; the rest of CustomLLM's signature (api_base, api_key,
    logging_obj, encoding, headers, timeout, client, …) means nothing to an in-process model
    and lands in ``_unused``. The sync and async paths share the work: the async ones only move
    the blocking call to a worker thread.
    """

    def completion(self, model, messages, model_response, optional_params, **_unused):
        slots = smollm2.core_slots()
        waited = time.perf_counter()
        taken = slots.take(smollm2.threads_per_instance()) if slots else []
        smollm2.add_core_wait(time.perf_counter() - waited)
        try:
            result = _run_chat(model, messages, optional_params)
        finally:
            if slots:
                slots.give_back_all(taken)
        return _fill_model_response(model_response, result)

    def acompletion(self, model, messages, model_response, optional_params, **_unused):
        # litellm calls this in an executor thread and may drop the result unawaited when
        # its caller is cancelled meanwhile: the coroutine is made only once awaited
        return LazyCall(self._acompletion, model, messages, model_response, optional_params)

    async def _acompletion(self, model, messages, model_response, optional_params):
        result = await _on_a_free_instance(_run_chat, model, messages, optional_params)
        return _fill_model_response(model_response, result)

    def embedding(self, model, input, model_response, **_unused):
        vectors, tokens = _run_embedding(model, input)
        return _fill_embedding_response(model_response, vectors, tokens)

    def aembedding(self, model, input, model_response, **_unused):
        return LazyCall(self._aembedding, model, input, model_response)  # see acompletion

    async def _aembedding(self, model, input, model_response):
        vectors, tokens = await asyncio.to_thread(_run_embedding, model, input)
        return _fill_embedding_response(model_response, vectors, tokens)
