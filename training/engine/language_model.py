"""LanguageModel: structured JSON generation over ``litellm.acompletion``.

One object per model configuration. Each call:
1. waits on a per-model asyncio semaphore (``max_concurrency``);
2. answers from the opt-in response cache when the call is deterministic (temperature 0);
3. asks for structured output — ``response_format`` json_schema when litellm says the provider
   supports it, otherwise the (compact) schema is spelled out in the prompt; either way the
   system prompt names the output fields with their types and descriptions (output_format.py);
4. retries transient errors (timeouts, 429, 5xx, connection) with exponential backoff, and
   never retries requests that cannot succeed (400 bad request, 401/403 authentication, 404
   unknown model, context window exceeded, unknown provider): those fail at once with a
   message saying what to fix;
5. parses forgivingly and validates strictly; a deterministic call whose output does not parse
   is retried at a small temperature (never identically), then counted as failed;
6. records usage (tokens, cost when litellm knows it, latency) into ``usage``.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

import pydantic

from training.engine import usage as usage_mod
from training.engine.cache import ResponseCache, cache_spec, make_cache, request_key
from training.engine.output_format import output_note, schema_note, with_output_note
from training.engine.parsing import OutputParseError, parse_output
from training.engine.saving import register_synalinks_serializable


class LanguageModelError(RuntimeError):
    """An LM call failed after its retries (or its output never parsed)."""


class LanguageModelUnreachable(LanguageModelError):
    """The LM endpoint could not be reached at all: training should stop, not count failures."""


class LanguageModelConfigError(LanguageModelError):
    """A request that can never succeed as configured (unknown provider or model, bad API key):
    not retried, and training stops on it instead of counting every prediction as failed."""


_LITELLM_LOCK = threading.Lock()
_LITELLM_READY = False


def get_litellm():
    """litellm, imported once by the engine with its debug banners off.

    litellm prints a "Give Feedback / Get Help" banner (and a provider list) on every error
    unless ``suppress_debug_info`` is set; in a training log that is noise on each failure.
    """
    global _LITELLM_READY
    import litellm

    if not _LITELLM_READY:
        with _LITELLM_LOCK:
            litellm.suppress_debug_info = True
            _LITELLM_READY = True
    return litellm


@dataclass
class RawCompletion:
    """What a provider returned: text, token counts and cost (None when unknown)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None


class _TransientError(Exception):
    """Raised by fakes to simulate a retryable provider error."""


_SEMAPHORES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _semaphore(key: tuple, limit: int) -> asyncio.Semaphore:
    """One semaphore per (model, api_base) per running event loop (semaphores bind to a loop)."""
    loop = asyncio.get_running_loop()
    per_loop = _SEMAPHORES.setdefault(loop, {})
    sem = per_loop.get(key)
    if sem is None:
        sem = per_loop[key] = asyncio.Semaphore(limit)
    return sem


#: litellm/openai exception classes (matched by name anywhere in the MRO, so the fakes and the
#: tests need not import litellm) for requests that fail the same way every time.
_NON_TRANSIENT_TYPES = {
    "BadRequestError",
    "NotFoundError",
    "ContextWindowExceededError",
    "AuthenticationError",
    "PermissionDeniedError",
    "UnprocessableEntityError",
    "ContentPolicyViolationError",
    "UnsupportedParamsError",
}
_NON_TRANSIENT_STATUS = {400, 401, 403, 404, 422}


def _type_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _is_non_transient(exc: BaseException) -> bool:
    """Errors that retrying cannot fix: the same request fails the same way."""
    if _type_names(exc) & _NON_TRANSIENT_TYPES:
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and status in _NON_TRANSIENT_STATUS


def _is_transient(exc: BaseException) -> bool:
    if _is_non_transient(exc):
        return False
    if isinstance(exc, _TransientError | asyncio.TimeoutError | TimeoutError | ConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status == 429 or status >= 500 or status == 408):
        return True
    name = type(exc).__name__
    return name in {
        "Timeout",
        "APIConnectionError",
        "RateLimitError",
        "ServiceUnavailableError",
        "InternalServerError",
        "BadGatewayError",
        "APIError",
    }


_CONNECTION_TYPES = {"APIConnectionError", "ConnectError", "ConnectTimeout", "ClientConnectorError"}
_CONNECTION_TEXT = (
    "connection error",
    "connection refused",
    "failed to establish",
    "name or service not known",
    "nodename nor servname",
    "cannot connect",
)


def _is_connection_error(exc: BaseException) -> bool:
    """The endpoint could not be reached (litellm wraps these in several exception types)."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if isinstance(current, ConnectionError) or type(current).__name__ in _CONNECTION_TYPES:
            return True
        text = str(current).lower()
        if any(marker in text for marker in _CONNECTION_TEXT):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


@register_synalinks_serializable(package="synalinks")
class LanguageModel:
    """A chat model reached through litellm (``provider/name`` model strings).

    ``temperature`` defaults to 0 so calls are deterministic: only those are cached and memoised.
    ``cache``: False (default), True/"disk", "disk:/dir", "memory", or "redis://…".
    """

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        max_concurrency: int = 8,
        retries: int = 3,
        backoff: float = 0.5,
        timeout: float | None = 120.0,
        cache: Any = False,
        parse_retry_temperature: float = 0.3,
        structured_output: str = "auto",
        seed: int | None = None,
    ):
        if not isinstance(model, str) or not model:
            raise ValueError("LanguageModel(model=...) needs a model string like 'provider/name'")
        if temperature < 0:
            raise ValueError(f"LanguageModel({model!r}): temperature must be >= 0")
        if max_concurrency < 1:
            raise ValueError(f"LanguageModel({model!r}): max_concurrency must be >= 1")
        if structured_output not in ("auto", "response_format", "prompt"):
            raise ValueError("structured_output must be 'auto', 'response_format' or 'prompt'")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"LanguageModel({model!r}): seed must be an integer or None")
        self.model = model
        self.api_base = api_base
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.max_concurrency = int(max_concurrency)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.timeout = timeout
        self.parse_retry_temperature = float(parse_retry_temperature)
        self.structured_output = structured_output
        self.seed = seed
        self.cache: ResponseCache | None = make_cache(cache)
        self._supports_schema: bool | None = None
        if model.startswith("local/"):
            self._load_local_provider()

    # -- configuration -------------------------------------------------------------------
    def _load_local_provider(self) -> None:
        load_local_provider(f"LanguageModel({self.model!r})", self.model)

    def get_config(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "api_base": self.api_base,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "max_concurrency": self.max_concurrency,
            "retries": self.retries,
            "backoff": self.backoff,
            "timeout": self.timeout,
            "cache": cache_spec(self.cache),
            "parse_retry_temperature": self.parse_retry_temperature,
            "structured_output": self.structured_output,
            "seed": self.seed,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> LanguageModel:
        return cls(**config)

    def __repr__(self) -> str:
        where = f", api_base={self.api_base!r}" if self.api_base else ""
        return f"{type(self).__name__}(model={self.model!r}{where})"

    @property
    def deterministic(self) -> bool:
        return self.temperature == 0.0

    def supports_response_schema(self) -> bool:
        if self.structured_output != "auto":
            return self.structured_output == "response_format"
        if self._supports_schema is None:
            try:
                litellm = get_litellm()
                self._supports_schema = bool(litellm.supports_response_schema(self.model))
            except Exception:
                self._supports_schema = False
        return self._supports_schema

    def _describe(self) -> str:
        return f"model {self.model!r}" + (
            f" at api_base {self.api_base!r}" if self.api_base else ""
        )

    # -- the call ------------------------------------------------------------------------
    async def __call__(
        self,
        messages: list[dict[str, str]],
        data_model: type[pydantic.BaseModel],
        temperature: float | None = None,
        context: dict[str, Any] | None = None,
    ) -> pydantic.BaseModel:
        """Generate one ``data_model`` instance; raises :class:`LanguageModelError` on failure."""
        temperature = self.temperature if temperature is None else float(temperature)
        schema = (
            data_model.get_schema()
            if hasattr(data_model, "get_schema")
            else data_model.model_json_schema()
        )
        use_format = self.supports_response_schema()
        messages = with_output_note(
            messages, output_note(schema, with_schema=not use_format, key=data_model)
        )
        attempts = [temperature]
        if temperature == 0.0:
            attempts.append(self.parse_retry_temperature)  # never retry a parse identically
        last_error: Exception | None = None
        for attempt_temperature in attempts:
            text = await self._complete_cached(
                messages, schema if use_format else None, attempt_temperature, context
            )
            try:
                return parse_output(text, data_model)
            except OutputParseError as exc:
                last_error = exc
                usage_mod.record(
                    usage_mod.UsageRecord(
                        model=self.model, kind="parse", failed=True, error=str(exc)[:300]
                    )
                )
                self._drop_cached(messages, schema if use_format else None, attempt_temperature)
        raise LanguageModelError(f"{self._describe()}: {last_error}")

    def _key(self, messages: list, schema: dict | None, temperature: float) -> str:
        payload = {
            "model": self.model,
            "api_base": self.api_base,
            "messages": messages,
            "schema": schema,
            "temperature": temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:  # absent when unset, so older cache entries stay valid
            payload["seed"] = self.seed
        return request_key(payload)

    def _drop_cached(self, messages: list, schema: dict | None, temperature: float) -> None:
        if self.cache is not None and temperature == 0.0:
            self.cache.set(self._key(messages, schema, temperature), {"invalid": True})

    async def _complete_cached(
        self, messages: list, schema: dict | None, temperature: float, context: dict | None
    ) -> str:
        key = None
        if self.cache is not None and temperature == 0.0:
            key = self._key(messages, schema, temperature)
            hit = self.cache.get(key)
            if hit is not None and not hit.get("invalid"):
                usage_mod.record(UsageRecordFactory.hit(self.model))
                return hit["text"]
        raw = await self._complete_with_retries(messages, schema, temperature, context)
        if key is not None:
            self.cache.set(
                key,
                {
                    "text": raw.text,
                    "prompt_tokens": raw.prompt_tokens,
                    "completion_tokens": raw.completion_tokens,
                },
            )
        return raw.text

    async def _complete_with_retries(
        self, messages: list, schema: dict | None, temperature: float, context: dict | None
    ) -> RawCompletion:
        sem = _semaphore((self.model, self.api_base), self.max_concurrency)
        delay = self.backoff
        for attempt in range(self.retries + 1):
            async with sem:
                started = time.perf_counter()
                try:
                    raw = await self._raw_complete(messages, schema, temperature, context)
                except Exception as exc:
                    latency = time.perf_counter() - started
                    usage_mod.record(
                        usage_mod.UsageRecord(
                            model=self.model, latency=latency, failed=True, error=_short(exc)
                        )
                    )
                    if not _is_transient(exc) or attempt == self.retries:
                        raise _call_error(self._describe(), exc, attempt + 1) from exc
                    last = exc
                else:
                    usage_mod.record(
                        usage_mod.UsageRecord(
                            model=self.model,
                            prompt_tokens=raw.prompt_tokens,
                            completion_tokens=raw.completion_tokens,
                            cost=raw.cost,
                            latency=time.perf_counter() - started,
                        )
                    )
                    return raw
            await asyncio.sleep(delay * (1 + random.random() * 0.1))
            delay *= 2
        raise LanguageModelError(f"{self._describe()}: {last}")  # pragma: no cover

    async def _raw_complete(
        self, messages: list, schema: dict | None, temperature: float, context: dict | None
    ) -> RawCompletion:
        """One provider request through litellm (overridden by the testing fakes)."""
        litellm = get_litellm()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            "num_retries": 0,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.max_tokens:
            kwargs["max_tokens"] = self.max_tokens
        if self.timeout:
            kwargs["timeout"] = self.timeout
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(schema), "schema": schema, "strict": True},
            }
        response = await litellm.acompletion(**kwargs)
        text = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:
            cost = None
        return RawCompletion(
            text=text,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            cost=cost,
        )


class UsageRecordFactory:
    @staticmethod
    def hit(model: str) -> usage_mod.UsageRecord:
        return usage_mod.UsageRecord(model=model, cache_hit=True)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text[:300] or type(exc).__name__


def _schema_name(schema: dict) -> str:
    title = str(schema.get("title") or "output")
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in title)[:64] or "output"


def _with_schema_in_prompt(messages: list[dict], schema: dict) -> list[dict]:
    """Append the (compact) output schema to the system message (kept for callers and tests;
    LanguageModel itself uses :mod:`training.engine.output_format`)."""
    return with_output_note(messages, schema_note(schema))


def load_local_provider(where: str, model: str) -> None:
    """Register the ``local`` litellm provider and check ``model`` can run here (loads nothing).

    Fails at construction — not on the first call in the middle of a run — with what is missing
    and the command that installs it, or the list of local models for an unknown name.
    """
    get_litellm()
    try:
        import training.engine.local as local
    except ImportError as exc:
        raise LanguageModelConfigError(
            f"{where}: the local provider training.engine.local cannot be imported: {exc}"
        ) from exc
    try:
        local.check_available(model)
    except local.LocalModelError as exc:
        raise LanguageModelConfigError(f"{where}: {exc}") from exc


def _local_models_hint() -> str:
    try:
        from training.engine.local import local_models_hint
    except ImportError:  # pragma: no cover - the local package is part of the engine
        return "Offline models: 'local/smollm2' (chat), 'local/minilm' (embeddings)."
    return local_models_hint()


def _long(exc: BaseException, limit: int = 600) -> str:
    text = " ".join(str(exc).split())
    return text[:limit] or type(exc).__name__


def _call_error(where: str, exc: BaseException, attempts: int) -> LanguageModelError:
    """The error a failed provider request becomes: what went wrong, where, and what to do.

    Unknown provider / model and authentication errors are :class:`LanguageModelConfigError`
    (nothing will work until the configuration changes); an unreachable endpoint is
    :class:`LanguageModelUnreachable`; anything else is a :class:`LanguageModelError` for this
    one request (e.g. a prompt longer than the context window).
    """
    kind = type(exc).__name__
    names = _type_names(exc)
    status = getattr(exc, "status_code", None)
    text = str(exc)
    if "LLM Provider NOT provided" in text:
        return LanguageModelConfigError(
            f"{where}: litellm does not know this model's provider ({kind}, not retried). "
            f"litellm says: {_long(exc)} -- {_local_models_hint()}"
        )
    if "AuthenticationError" in names or "PermissionDeniedError" in names or status in (401, 403):
        return LanguageModelConfigError(
            f"{where}: the provider refused the credentials ({kind}, not retried). Set the "
            f"provider's API key in the environment (e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY). "
            f"Provider said: {_long(exc, 300)}"
        )
    if "NotFoundError" in names or status == 404:
        return LanguageModelConfigError(
            f"{where}: model not found ({kind}, not retried): {_long(exc)} -- "
            f"{_local_models_hint()}"
        )
    if "ContextWindowExceededError" in names:
        return LanguageModelError(
            f"{where}: the prompt does not fit the model's context window ({kind}, not "
            "retried); use fewer or shorter few-shot examples, shorter instructions or shorter "
            f"inputs: {_long(exc, 300)}"
        )
    if _is_non_transient(exc):
        return LanguageModelError(
            f"{where}: the provider rejected the request ({kind}, not retried): {_long(exc)}"
        )
    if _is_connection_error(exc):
        return LanguageModelUnreachable(
            f"Language model unreachable: {where} ({kind}: {_short(exc)})"
        )
    return LanguageModelError(f"{where} failed after {attempts} attempt(s): {kind}: {_short(exc)}")
