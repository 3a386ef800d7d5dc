"""LanguageModel: structured JSON generation over ``litellm.acompletion``.

One object per model configuration. Each call:
1. waits on a per-model asyncio semaphore (``max_concurrency``, :mod:`training.engine.language_models.retry`),
   then for a slot of the provider's limit shared by every process (:mod:`~training.engine.language_models.limits.rate_limits`);
2. answers from the opt-in response cache when the call is deterministic (temperature 0);
3. asks for structured output — ``response_format`` json_schema when litellm says the provider
   supports it, otherwise the (compact) schema is spelled out in the prompt; either way the
   system prompt names the output fields with their types and descriptions (output_format.py);
4. retries transient errors (timeouts, 429, 5xx, connection) with exponential backoff, and
   never retries requests that cannot succeed (400 bad request, 401/403 authentication, 404
   unknown model, context window exceeded, unknown provider): those fail at once with a
   message saying what to fix (the rules and error types: :mod:`training.engine.language_models.errors`);
5. parses forgivingly and validates strictly; a deterministic call whose output does not parse
   is retried at a small temperature (never identically), then counted as failed;
6. records usage (tokens, cost when litellm knows it, latency) into ``usage``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pydantic

from training.engine.language_models import budget as budget_mod
from training.engine.language_models import offline, tracing
from training.engine.language_models import usage as usage_mod
from training.engine.language_models.cache import ResponseCache, cache_spec, make_cache, request_key
from training.engine.language_models.completion import (
    RawCompletion,
    new_meta,
    read_response,
    response_format,
)
from training.engine.language_models.endpoints.address_guard import AddressPolicy
from training.engine.language_models.endpoints.endpoint_client import EndpointClients
from training.engine.language_models.errors import (
    LanguageModelConfigError,
    LanguageModelError,
    LanguageModelUnreachable,
    cancelled,
    short_message,
)
from training.engine.language_models.limits import rate_limits
from training.engine.language_models.litellm_loader import check_local_model, get_litellm
from training.engine.language_models.output_format import output_note, with_output_note
from training.engine.language_models.parsing import OutputParseError, parse_output
from training.engine.language_models.retry import call_with_retries
from training.engine.language_models.scoring import LabelScoring
from training.engine.saving import register_synalinks_serializable

#: Re-exported: callers (the trainer, the dashboard's services, tests) long imported these here.
__all__ = [
    "LanguageModel",
    "LanguageModelConfigError",
    "LanguageModelError",
    "LanguageModelUnreachable",
    "RawCompletion",
    "get_litellm",
    "check_local_model",
]


#: The ways a call asks for structured output (``LanguageModel(structured_output=…)``).
STRUCTURED_OUTPUTS = ("auto", "response_format", "json_object", "prompt")


@register_synalinks_serializable(package="synalinks")
class LanguageModel(LabelScoring):
    """A chat model reached through litellm (``provider/name`` model strings).

    ``temperature`` defaults to 0 so calls are deterministic: only those are cached and memoised.

    Args:
        model: ``"provider/name"`` as litellm knows it (``"openai/gpt-4o-mini"``,
            ``"ollama/llama3"``), or an offline ``"local/…"`` model (checked at construction).
        api_base: the endpoint, when not the provider's default. A model with one is called
            with ``api_key`` or no key at all, never a provider key from the environment
            (:mod:`~training.engine.language_models.endpoints.endpoint_client`), and its connections
            are checked where they are made (:mod:`~training.engine.language_models.endpoints.address_guard`).
        api_key: the endpoint's own key (only with ``api_base``); never saved in the config,
            shown in ``repr`` or traced.
        endpoint: the name of a saved endpoint this model's ``api_base`` came from, kept in
            the config (an exported program names its endpoint, never its key).
        allow_private_addresses: whether ``api_base`` may be a loopback or private address
            (a self-hosted server); link-local and metadata addresses never are.
        temperature: sampling temperature (>= 0); 0 makes calls deterministic.
        max_tokens: upper bound on the completion's tokens (None: the provider's default).
        max_concurrency: requests in flight at once for this (model, api_base) in this
            process; the limit across processes is the installed provider limiter's
            (:mod:`~training.engine.language_models.limits.rate_limits`).
        retries: further attempts after a transient error (timeouts, 429, 5xx).
        backoff: seconds before the first retry; doubles after each.
        timeout: seconds one request may take (litellm's timeout); each attempt is also
            cancelled a few seconds after it, and never runs past
            :data:`~training.engine.language_models.retry.MAX_ATTEMPT_SECONDS` (:mod:`training.engine.language_models.retry`).
        cache: False (default), True/"disk", "disk:/dir", "memory", or "redis://…".
        parse_retry_temperature: the temperature of the one retry of a deterministic call
            whose output did not parse.
        structured_output: "auto" (ask litellm whether the provider supports
            ``response_format``), "response_format" (a ``json_schema`` response format),
            "json_object" (``{"type": "json_object", "schema": …}``, what llama-cpp-python's
            server turns into a grammar; the schema is in the prompt too), or "prompt"
            (schema in the prompt).
        seed: passed to providers that honour it.

    Returns:
        Calling it, ``await lm(messages, DataModelClass)`` returns one validated instance of the
        data model, or raises :class:`LanguageModelError`.

    Example:

    ```python
    language_model = synalinks.LanguageModel(model="ollama/mistral")
    answer = await language_model(
        [{"role": "user", "content": "What is 2 + 2?"}], data_model=Answer
    )
    ```
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
        api_key: str | None = None,
        endpoint: str | None = None,
        allow_private_addresses: bool = True,
    ):
        if not isinstance(model, str) or not model:
            raise ValueError("LanguageModel(model=...) needs a model string like 'provider/name'")
        if temperature < 0:
            raise ValueError(f"LanguageModel({model!r}): temperature must be >= 0")
        if max_concurrency < 1:
            raise ValueError(f"LanguageModel({model!r}): max_concurrency must be >= 1")
        if structured_output not in STRUCTURED_OUTPUTS:
            raise ValueError(
                "structured_output must be one of " + ", ".join(map(repr, STRUCTURED_OUTPUTS))
            )
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
        self.endpoint = endpoint or None
        self.allow_private_addresses = bool(allow_private_addresses)
        self._endpoint = (
            EndpointClients(
                model, api_base, api_key, AddressPolicy(self.allow_private_addresses), timeout
            )
            if api_base
            else None
        )
        self.cache: ResponseCache | None = make_cache(cache)
        self._supports_schema: bool | None = None
        self._can_score: bool | None = None
        if offline.serves(model):
            self._check_local_model()

    # -- configuration -------------------------------------------------------------------
    def _check_local_model(self) -> None:
        check_local_model(f"LanguageModel({self.model!r})", self.model)

    def get_config(self) -> dict[str, Any]:
        """The saved configuration: never ``api_key``; ``endpoint`` and
        ``allow_private_addresses`` only when they say something."""
        config = {
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
        if self.endpoint:
            config["endpoint"] = self.endpoint
        if not self.allow_private_addresses:
            config["allow_private_addresses"] = False
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> LanguageModel:
        return cls(**config)

    def with_settings(self, **settings: Any) -> LanguageModel:
        """This model with other ``settings`` (``max_tokens``, ``temperature``, ``cache``…) at
        the same address, with the same key.

        What a helper model that names no model of its own (an optimizer's mutations, an LM
        judge) is built from: it must go where the program's model goes, never to the
        provider's default address with whatever key the environment holds.
        """
        unknown = {"model", "api_base", "api_key", "endpoint"} & set(settings)
        if unknown:
            raise ValueError(f"with_settings keeps the model and its address; got {unknown}")
        config = {**self.get_config(), **settings}
        config["allow_private_addresses"] = self.allow_private_addresses
        key = self._endpoint.api_key if self._endpoint is not None else None
        return type(self)(**config, api_key=key)

    def __repr__(self) -> str:
        where = f", api_base={self.api_base!r}" if self.api_base else ""
        return f"{type(self).__name__}(model={self.model!r}{where})"

    @property
    def holds_to_schema(self) -> bool:
        """Whether generation itself is held to the schema's length bounds (the local model's
        grammar), so a bounded schema shortens answers instead of failing their validation:
        ``output_bounds`` bounds only such models."""
        return offline.serves(self.model)

    @property
    def deterministic(self) -> bool:
        return self.temperature == 0.0

    def supports_response_schema(self) -> bool:
        if self.structured_output != "auto":
            return self.structured_output in ("response_format", "json_object")
        if self._supports_schema is None:
            self._supports_schema = self._schema_support()
        return self._supports_schema

    def _schema_support(self) -> bool:
        """An offline model's provider states it (no litellm import: a page forecasting a
        local model's prompts pays nothing for it); any other model, litellm's model map."""
        info = offline.model_info(self.model)
        if info is not None:
            return bool(info.get("supports_response_schema"))
        try:
            return bool(get_litellm().supports_response_schema(self.model))
        except Exception:
            return False

    def _describe(self) -> str:
        return f"model {self.model!r}" + (
            f" at api_base {self.api_base!r}" if self.api_base else ""
        )

    # -- the call ------------------------------------------------------------------------
    def prompt_for(
        self, messages: list[dict], data_model: type[pydantic.BaseModel]
    ) -> tuple[list[dict], dict | None]:
        """(``messages`` with the note on the answer's shape, the schema to send as the
        response format or None when the provider takes none). The note holds the schema
        itself when the provider is not given it (or only as plain JSON mode)."""
        schema = (
            data_model.get_schema()
            if hasattr(data_model, "get_schema")
            else data_model.model_json_schema()
        )
        use_format = self.supports_response_schema()
        with_schema = not use_format or self.structured_output == "json_object"
        note = output_note(schema, with_schema, key=data_model)
        return with_output_note(messages, note), schema if use_format else None

    async def __call__(
        self,
        messages: list[dict[str, str]],
        data_model: type[pydantic.BaseModel],
        temperature: float | None = None,
        context: dict[str, Any] | None = None,
    ) -> pydantic.BaseModel:
        """Generate one ``data_model`` instance; raises :class:`LanguageModelError` on failure."""
        temperature = self.temperature if temperature is None else float(temperature)
        messages, response_schema = self.prompt_for(messages, data_model)
        attempts = [temperature]
        if temperature == 0.0:
            attempts.append(self.parse_retry_temperature)  # never retry a parse identically
        last_error: Exception | None = None
        for attempt_temperature in attempts:
            # What the trace of this call needs (None: no recorder listens, nothing is built).
            meta = new_meta() if tracing.active() else None
            try:
                text = await self._complete_cached(
                    messages, response_schema, attempt_temperature, context, meta
                )
            except LanguageModelError as exc:
                if meta is not None:
                    self._trace(messages, meta, error=str(exc), failed=True)
                raise
            try:
                output = parse_output(text, data_model)
            except OutputParseError as exc:
                last_error = exc
                usage_mod.record(
                    usage_mod.UsageRecord(
                        model=self.model, kind="parse", failed=True, error=str(exc)[:300]
                    )
                )
                if meta is not None:
                    self._trace(
                        messages,
                        meta,
                        response=text,
                        error=f"unparsable output: {exc}",
                        failed=True,
                    )
                self._drop_cached(messages, response_schema, attempt_temperature)
                continue
            if meta is not None:
                self._trace(messages, meta, response=text, parsed=output)
            return output
        raise LanguageModelError(f"{self._describe()}: {last_error}")

    def _trace(self, messages: list, meta: dict, **values: Any) -> None:
        # ``meta`` (this attempt's own dict) becomes the record: nothing copied on this path
        meta["kind"] = "completion"
        meta["model"] = self.model
        meta["messages"] = messages
        meta.update(values)
        tracing.emit_values(meta)

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
        self,
        messages: list,
        schema: dict | None,
        temperature: float,
        context: dict | None,
        meta: dict | None = None,
    ) -> str:
        key = None
        if self.cache is not None and temperature == 0.0:
            key = self._key(messages, schema, temperature)
            hit = self.cache.get(key)
            if hit is not None and not hit.get("invalid"):
                usage_mod.record(usage_mod.UsageRecord(model=self.model, cache_hit=True))
                if meta is not None:
                    meta["cache_hit"] = True
                return hit["text"]
        raw = await self._complete_with_retries(
            lambda: self._raw_complete(messages, schema, temperature, context), meta, messages
        )
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
        self,
        request: Callable[[], Awaitable[RawCompletion]],
        meta: dict | None = None,
        messages: list | None = None,
    ) -> RawCompletion:
        """``request()`` (one provider request) with retries; each attempt's usage is
        recorded, and added to ``meta`` (the call's trace: latency, attempts, tokens, cost)
        when one is given. Each attempt first reserves its bound (one call, ``messages``'
        token bound, its price) in the active budgets (:mod:`~training.engine.language_models.budget`)."""

        def bound() -> tuple[int, int, float | None]:
            tokens = budget_mod.token_bound(messages or [], self.max_tokens)
            return 1, tokens, self.cost_bound(tokens)

        def succeeded(raw: RawCompletion, latency: float) -> None:
            if meta is not None:
                meta["latency"] += latency
                meta["attempts"] += 1
                meta["prompt_tokens"] += raw.prompt_tokens
                meta["completion_tokens"] += raw.completion_tokens
                meta["cost"] = raw.cost
            usage_mod.record(
                usage_mod.UsageRecord(
                    model=self.model,
                    prompt_tokens=raw.prompt_tokens,
                    completion_tokens=raw.completion_tokens,
                    cost=raw.cost,
                    latency=latency,
                )
            )

        def failed(exc: BaseException, latency: float) -> None:
            if meta is not None:
                meta["latency"] += latency
                meta["attempts"] += 1
            if cancelled(exc):  # a call made, then given up by its caller: no failure
                usage_mod.record(usage_mod.UsageRecord(model=self.model, latency=latency))
                return
            usage_mod.record(
                usage_mod.UsageRecord(
                    model=self.model, latency=latency, failed=True, error=short_message(exc)
                )
            )

        return await call_with_retries(
            request,
            where=self._describe(),
            semaphore_key=(self.model, self.api_base),
            max_concurrency=self.max_concurrency,
            retries=self.retries,
            backoff=self.backoff,
            on_success=succeeded,
            on_failure=failed,
            jitter=0.1,
            timeout=self.timeout,
            bound=bound,
            spent=lambda raw: (raw.prompt_tokens + raw.completion_tokens, raw.cost),
            limit_key=None if self.holds_to_schema else self.provider_key,
        )

    @property
    def provider_key(self) -> rate_limits.ProviderKey:
        """What this model's requests count against in the provider's shared rate limit."""
        return rate_limits.ProviderKey(self.model, self.api_base or None)

    def cost_bound(self, tokens: int) -> float | None:
        """The most ``tokens`` tokens can cost on this model (each at the dearer of its input
        and output prices), for a budget's reservation; 0 for a local model, None when the
        price is unknown (a cost cap cannot bound such calls)."""
        if self.holds_to_schema:  # a local model: free
            return 0.0
        try:
            info = get_litellm().get_model_info(self.model)
        except Exception:
            return None
        prices = [info.get("input_cost_per_token"), info.get("output_cost_per_token")]
        known = [float(price) for price in prices if price is not None]
        return tokens * max(known) if known else None

    async def _raw_complete(
        self, messages: list, schema: dict | None, temperature: float, context: dict | None
    ) -> RawCompletion:
        """One provider request through litellm (overridden by the testing fakes)."""
        raw, _ = await self._request(messages, schema, temperature)
        return raw

    async def _request(
        self,
        messages: list,
        schema: dict | None,
        temperature: float,
        extra: dict[str, Any] | None = None,
    ) -> tuple[RawCompletion, Any]:
        """One provider request through litellm: (what it returned, the answer's per-token
        log-probabilities when ``extra`` asked for them, else None)."""
        litellm = get_litellm()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            "num_retries": 0,
        }
        if self._endpoint is not None:  # its own key or none, a guarded client
            kwargs.update(self._endpoint.request_options("chat"))
        if self.max_tokens:
            kwargs["max_tokens"] = self.max_tokens
        if self.timeout:
            kwargs["timeout"] = self.timeout
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if schema is not None:
            kwargs["response_format"] = response_format(schema, self.structured_output)
        kwargs.update(extra or {})
        response = await litellm.acompletion(**kwargs)
        return read_response(litellm, response)
