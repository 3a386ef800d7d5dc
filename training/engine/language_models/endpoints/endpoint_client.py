"""How a call to a custom endpoint (a model with an ``api_base``) reaches it, and with what key.

litellm sends a model's request with the key it finds: the one passed, else the environment's
(``OPENAI_API_KEY``, ``HOSTED_VLLM_API_KEY``…). A server's provider keys must never leave for
an endpoint someone typed, so :func:`request_options` always passes the key explicitly: the
endpoint's own, or :data:`NO_KEY` (a placeholder, never a secret) when it has none, so no
provider falls back to the environment.

For the self-hosted servers people run (:data:`CLIENTS`: OpenAI-compatible servers, vLLM,
Ollama, LM Studio, llamafile, a LiteLLM proxy, Xinference) it also hands litellm the HTTP
client to use, built on :class:`~training.engine.language_models.endpoints.address_guard.GuardedTransport`:
every connection is checked where it is made (DNS rebinding cannot turn it to a metadata
address) and the request carries the endpoint's key or no credential header at all (not
even the placeholder). litellm takes a per-call ``client`` of the type its handler for that
provider uses: ``openai.AsyncOpenAI`` (the OpenAI SDK path) or litellm's ``AsyncHTTPHandler``
(its own HTTP path); a client of the other type is silently replaced by one of litellm's
own, so the table says which, per provider and call kind, as litellm 1.110 routes them, and
``tests/engine/language_models/test_endpoint_keys.py`` proves every entry's requests pass
through the guard.

Clients are kept per model object and event loop (a connection pool is bound to its loop).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from training.engine.language_models.endpoints.address_guard import AddressPolicy, GuardedTransport

#: The key passed when an endpoint has none: something litellm and the OpenAI SDK accept as
#: given (so neither reads the environment), and that is nobody's secret.
NO_KEY = "no-key"

#: provider prefix → the client type litellm's handler takes, for "chat" and "embedding".
#: "openai": openai.AsyncOpenAI; "http": litellm's AsyncHTTPHandler. A kind a provider lacks
#: here (Ollama's embeddings use a module-wide client of litellm's) gets no guarded client.
CLIENTS: dict[str, dict[str, str]] = {
    "openai": {"chat": "openai", "embedding": "openai"},
    "hosted_vllm": {"chat": "http", "embedding": "http"},
    "ollama": {"chat": "http"},
    "ollama_chat": {"chat": "http"},
    "lm_studio": {"chat": "openai", "embedding": "http"},
    "llamafile": {"chat": "openai", "embedding": "http"},
    "litellm_proxy": {"chat": "openai", "embedding": "openai"},
    "xinference": {"chat": "openai", "embedding": "openai"},
}
#: Providers whose model information (price, abilities) litellm fetches from the server
#: itself (Ollama's ``POST /api/show``, over a module-wide client of its own) unless its model
#: table knows the model: such a model at a custom endpoint is declared there first
#: (:func:`declare_self_hosted`), so no request reaches the endpoint outside the guard.
ASKS_THE_SERVER = frozenset({"ollama", "ollama_chat"})


def declare_self_hosted(model: str) -> None:
    """Enter ``model`` (``ollama/llama3``) in litellm's model table as a free self-hosted chat
    model (``litellm.register_model``), unless the table has it already."""
    from training.engine.language_models.litellm_loader import get_litellm

    litellm = get_litellm()
    provider, _, name = model.partition("/")
    names = {model, name, f"ollama/{name}", f"ollama_chat/{name}"}
    if any(key in litellm.model_cost for key in names):
        return
    litellm.register_model(
        {
            model: {
                "litellm_provider": provider,
                "mode": "chat",
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0,
            }
        }
    )


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


#: Where litellm sends a provider's requests when a model names no ``api_base``: the
#: environment variables it reads first, then its built-in default ("" for none). A provider
#: not listed is reached at its public address, unless ``<PROVIDER>_API_BASE`` says otherwise.
DEFAULT_BASES: dict[str, tuple[tuple[str, ...], str]] = {
    "openai": (("OPENAI_BASE_URL", "OPENAI_API_BASE"), ""),
    "ollama": (("OLLAMA_API_BASE",), "http://localhost:11434"),
    "ollama_chat": (("OLLAMA_API_BASE",), "http://localhost:11434"),
    "llamafile": (("LLAMAFILE_API_BASE",), "http://127.0.0.1:8080/v1"),
    "lm_studio": (("LM_STUDIO_API_BASE",), ""),
    "xinference": (("XINFERENCE_API_BASE",), "http://127.0.0.1:9997/v1"),
    "hosted_vllm": (("HOSTED_VLLM_API_BASE",), ""),
    "lemonade": (("LEMONADE_API_BASE",), "http://localhost:8000/api/v1"),
    "litellm_proxy": (("LITELLM_PROXY_API_BASE",), ""),
}


def default_api_base(model: str) -> str:
    """The address a model with no ``api_base`` is sent to when it is not its provider's
    public API ("" then): an environment variable litellm reads, or litellm's built-in
    default for a self-hosted provider (``ollama/…`` → ``http://localhost:11434``). Such an
    address must pass the same rule as one typed on a program."""
    import os

    provider = provider_of(model)
    if not provider:
        return ""
    names, default = DEFAULT_BASES.get(provider, ((), ""))
    for name in (*names, f"{provider.upper()}_API_BASE"):
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return default


def guarded(model: str, kind: str) -> bool:
    """Whether calls of ``kind`` ("chat" or "embedding") to ``model`` at a custom endpoint go
    through the address guard."""
    return kind in CLIENTS.get(provider_of(model), {})


class EndpointClients:
    """The guarded litellm clients of one model object, one per event loop.

    Args:
        model: the litellm model string (``hosted_vllm/…``).
        api_base: the endpoint.
        api_key: its own key, or None.
        policy: where its connections may go.
        timeout: seconds a request may take (the client's own bound, besides litellm's).
    """

    def __init__(
        self,
        model: str,
        api_base: str,
        api_key: str | None,
        policy: AddressPolicy,
        timeout: float | None,
    ):
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        self.policy = policy
        self.timeout = timeout
        self._per_loop: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        if provider_of(model) in ASKS_THE_SERVER:
            declare_self_hosted(model)

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}({self.model!r}, {self.api_base!r})"

    @property
    def api_key(self) -> str | None:
        """The endpoint's own key (for a model built on the same endpoint; never shown)."""
        return self._api_key

    def _build(self, client_type: str) -> Any:
        import httpx

        transport = GuardedTransport(self.policy, credential=self._api_key)
        timeout = httpx.Timeout(self.timeout or 600.0, connect=min(self.timeout or 10.0, 10.0))
        if client_type == "openai":
            import openai

            return openai.AsyncOpenAI(
                api_key=self._api_key or NO_KEY,
                base_url=self.api_base,
                # trust_env off: a proxy from the environment would connect past the guard
                http_client=httpx.AsyncClient(
                    transport=transport, timeout=timeout, trust_env=False
                ),
                max_retries=0,  # the engine's retry loop decides
                timeout=timeout,
            )
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        return AsyncHTTPHandler(transport=transport, timeout=timeout)

    def client(self, kind: str) -> Any | None:
        """The running loop's guarded client for ``kind``, or None when it has none."""
        client_type = CLIENTS.get(provider_of(self.model), {}).get(kind)
        if client_type is None:
            return None
        per_loop = self._per_loop.setdefault(asyncio.get_running_loop(), {})
        if client_type not in per_loop:
            per_loop[client_type] = self._build(client_type)
        return per_loop[client_type]

    def request_options(self, kind: str) -> dict[str, Any]:
        """What a litellm call to this endpoint adds: ``api_base``, the explicit ``api_key``
        (never the environment's) and the guarded ``client`` where there is one."""
        options: dict[str, Any] = {"api_base": self.api_base, "api_key": self._api_key or NO_KEY}
        client = self.client(kind)
        if client is not None:
            options["client"] = client
        return options
