"""Errors of LM and embedding calls, and the rules that say which ones are worth retrying.

One home for what a failed provider request means, shared by :class:`LanguageModel` and
:class:`EmbeddingModel`:

- timeouts, 408, 429, 5xx and connection errors are *transient*: retried with backoff
  (:mod:`training.engine.language_models.retry`);
- 400/401/403/404/422, context-window and unknown-provider errors are *non-transient*: the same
  request fails the same way every time, so it fails at once with a message saying what to fix;
- :func:`call_error` turns the last provider exception into the engine's error types, which the
  trainer tells apart: a :class:`LanguageModelError` is one counted failed prediction, a
  :class:`LanguageModelUnreachable` or :class:`LanguageModelConfigError` stops ``fit``.

Exception classes are matched by name anywhere in the MRO, so neither the test fakes nor the
tests need to import litellm.
"""

from __future__ import annotations

import asyncio

from training.engine.language_models import offline
from training.engine.language_models.redaction import redact


class LanguageModelError(RuntimeError):
    """An LM call failed after its retries (or its output never parsed).

    During ``fit`` / ``evaluate`` / ``predict`` the prediction becomes ``None`` and is counted
    in ``program.failed_predictions``; the batch goes on.

    Example:

    ```python
    try:
        answer = await language_model(messages, Answer)
    except synalinks.LanguageModelError as exc:
        print(f"no answer: {exc}")
    ```
    """


class LanguageModelUnreachable(LanguageModelError):
    """The LM endpoint could not be reached at all: training should stop, not count failures."""


class LanguageModelConfigError(LanguageModelError):
    """A request that can never succeed as configured (unknown provider or model, bad API key):
    not retried, and training stops on it instead of counting every prediction as failed."""


class TransientError(Exception):
    """Raised by the testing fakes to simulate a retryable provider error."""


#: litellm/openai exception classes for requests that fail the same way every time.
NON_TRANSIENT_TYPES = frozenset(
    {
        "BadRequestError",
        "NotFoundError",
        "ContextWindowExceededError",
        "AuthenticationError",
        "PermissionDeniedError",
        "UnprocessableEntityError",
        "ContentPolicyViolationError",
        "UnsupportedParamsError",
    }
)
NON_TRANSIENT_STATUS = frozenset({400, 401, 403, 404, 422})

#: Exception class names (litellm, openai, httpx) of errors a retry may fix.
TRANSIENT_TYPES = frozenset(
    {
        "Timeout",
        "APIConnectionError",
        "RateLimitError",
        "ServiceUnavailableError",
        "InternalServerError",
        "BadGatewayError",
        "APIError",
    }
)

_CONNECTION_TYPES = frozenset(
    {"APIConnectionError", "ConnectError", "ConnectTimeout", "ClientConnectorError"}
)
_CONNECTION_TEXT = (
    "connection error",
    "connection refused",
    "failed to establish",
    "name or service not known",
    "nodename nor servname",
    "cannot connect",
)


#: What providers say when no key was given at all (OpenAI's client raises it as a 500):
#: nothing works until the configuration changes, so it is never retried.
_MISSING_CREDENTIALS_TEXT = ("missing credentials", "api_key client option must be set")
#: A connection the address guard refused (``address_guard.REFUSED``, repeated here so this
#: module imports nothing of the engine): the same address is refused on every attempt.
_REFUSED_ADDRESS_TEXT = "refused by the endpoint address rule"


def is_missing_credentials(exc: BaseException) -> bool:
    """The provider's client had no API key at all."""
    text = str(exc).lower()
    return any(marker in text for marker in _MISSING_CREDENTIALS_TEXT)


def refused_address(exc: BaseException) -> BaseException | None:
    """The exception in ``exc``'s chain that says the address guard refused the connection
    (client libraries wrap it in their own "Connection error."), or None."""
    current: BaseException | None = exc
    for _ in range(10):
        if current is None:
            return None
        if _REFUSED_ADDRESS_TEXT in str(current):
            return current
        current = current.__cause__ or current.__context__
    return None


def _type_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def is_context_window(exc: BaseException) -> bool:
    """A prompt longer than the model's context window (litellm's error for it)."""
    return "ContextWindowExceededError" in _type_names(exc)


def is_non_transient(exc: BaseException) -> bool:
    """Errors that retrying cannot fix: the same request fails the same way."""
    if _type_names(exc) & NON_TRANSIENT_TYPES or is_missing_credentials(exc):
        return True
    if refused_address(exc) is not None:
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and status in NON_TRANSIENT_STATUS


def is_transient(exc: BaseException) -> bool:
    """Errors worth another attempt after a backoff: timeouts, 408, 429, 5xx, connections."""
    if is_non_transient(exc):
        return False
    if isinstance(exc, TransientError | asyncio.TimeoutError | TimeoutError | ConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status == 429 or status >= 500 or status == 408):
        return True
    return type(exc).__name__ in TRANSIENT_TYPES


def is_connection_error(exc: BaseException) -> bool:
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


def cancelled(exc: BaseException) -> bool:
    """Whether an attempt ended because its caller gave it up (the run was cancelled or
    paused, a cap stopped it, an interrupt: not an ``Exception``) rather than because the
    call failed. Such an attempt counts as a call made, never as a failed one: a cancelled
    run's usage, its traces and its error panel then tell one story."""
    return not isinstance(exc, Exception)


def short_message(exc: BaseException) -> str:
    """One line, at most 300 characters (what usage records and short errors carry)."""
    text = redact(str(exc).strip().replace("\n", " "))
    return text[:300] or type(exc).__name__


def _long(exc: BaseException, limit: int = 600) -> str:
    text = redact(" ".join(str(exc).split()))
    return text[:limit] or type(exc).__name__


def _local_models_hint() -> str:
    try:
        provider = offline.find()
    except ImportError:  # no offline provider installed or registered
        return "Offline models: 'local/smollm2' (chat), 'local/minilm' (embeddings)."
    return provider.local_models_hint()


def call_error(where: str, exc: BaseException, attempts: int) -> LanguageModelError:
    """The error a failed provider request becomes: what went wrong, where, and what to do.

    Unknown provider / model and authentication errors are :class:`LanguageModelConfigError`
    (nothing will work until the configuration changes); an unreachable endpoint is
    :class:`LanguageModelUnreachable`; anything else is a :class:`LanguageModelError` for this
    one request (e.g. a prompt longer than the context window).

    Args:
        where: who failed, e.g. ``"model 'openai/gpt-4o-mini' at api_base '…'"``.
        exc: the provider's last exception.
        attempts: how many requests were made.

    Returns:
        The :class:`LanguageModelError` (or subclass) to raise ``from exc``.
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
    refused = refused_address(exc)
    if refused is not None:
        return LanguageModelConfigError(
            f"{where}: the connection was not made (not retried): {_long(refused, 400)}"
        )
    if (
        "AuthenticationError" in names
        or "PermissionDeniedError" in names
        or status in (401, 403)
        or is_missing_credentials(exc)
    ):
        fix = (
            "Give its endpoint the key that server expects (a custom endpoint never gets the "
            "server's provider keys)"
            if "at api_base" in where
            else "Set the provider's API key in the environment (e.g. OPENAI_API_KEY, "
            "ANTHROPIC_API_KEY)"
        )
        return LanguageModelConfigError(
            f"{where}: the provider refused the credentials ({kind}, not retried). {fix}. "
            f"Provider said: {_long(exc, 300)}"
        )
    if "NotFoundError" in names or status == 404:
        return LanguageModelConfigError(
            f"{where}: model not found ({kind}, not retried): {_long(exc)} -- "
            f"{_local_models_hint()}"
        )
    if is_context_window(exc):
        return LanguageModelError(
            f"{where}: the prompt does not fit the model's context window ({kind}, not "
            "retried); use fewer or shorter few-shot examples, shorter instructions or shorter "
            f"inputs: {_long(exc, 300)}"
        )
    if is_non_transient(exc):
        return LanguageModelError(
            f"{where}: the provider rejected the request ({kind}, not retried): {_long(exc)}"
        )
    if is_connection_error(exc):
        return LanguageModelUnreachable(
            f"Language model unreachable: {where} ({kind}: {short_message(exc)})"
        )
    return LanguageModelError(
        f"{where} failed after {attempts} attempt(s): {kind}: {short_message(exc)}"
    )
