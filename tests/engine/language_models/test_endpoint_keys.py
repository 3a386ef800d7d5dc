"""A model with an ``api_base`` never sends the server's provider keys there, and connects only
where the address rule allows, checked when the connection is made.

A real HTTP listener on loopback records every request's headers while the environment holds
a distinct secret in every key variable litellm reads for each provider; chat and embedding
calls go through the engine's own LanguageModel / EmbeddingModel and litellm, for every
provider litellm routes to an OpenAI-style client.
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket

import pytest

import training.engine as synalinks
from tests.engine.language_models.helpers_listener import RecordingListener
from training.engine.language_models.endpoints.endpoint_client import CLIENTS, NO_KEY
from training.engine.language_models.errors import LanguageModelConfigError, LanguageModelError
from training.engine.language_models.litellm_loader import get_litellm

MESSAGES = [{"role": "user", "content": '{"query": "q"}'}]
SECRET = "server-secret-"
#: Key variables some providers read that validate_environment does not name.
ALSO_READ = (
    "OPENAI_API_KEY",
    "OPENAI_LIKE_API_KEY",
    "HOSTED_VLLM_API_KEY",
    "OLLAMA_API_KEY",
    "LM_STUDIO_API_KEY",
    "LLAMAFILE_API_KEY",
    "LITELLM_PROXY_API_KEY",
    "XINFERENCE_API_KEY",
    "AZURE_API_KEY",
    "ANTHROPIC_API_KEY",
)


class Answer(synalinks.DataModel):
    answer: str


def openai_style_providers() -> list[str]:
    """Every provider litellm sends through an OpenAI-style client: its OpenAI-compatible list,
    plus OpenAI itself, custom_openai and Ollama's two prefixes."""
    names = set(get_litellm().openai_compatible_providers) | {"openai", "custom_openai"}
    return sorted(names | {"ollama", "ollama_chat"} | set(CLIENTS))


def api_base(listener: RecordingListener, provider: str) -> str:
    return listener.url if provider.startswith("ollama") else listener.url + "/v1"


@functools.cache
def key_variables() -> tuple[str, ...]:
    """The key variables litellm names for these providers, and ALSO_READ."""
    names = set(ALSO_READ)
    for provider in openai_style_providers():
        if provider == "github_copilot":  # its "environment" is an OAuth device log-in
            continue
        try:
            report = get_litellm().validate_environment(model=f"{provider}/m")
        except Exception:
            continue
        names |= {n for n in report.get("missing_keys") or [] if "KEY" in n or "TOKEN" in n}
    return tuple(sorted(names))


@pytest.fixture
def server_keys(monkeypatch) -> set[str]:
    """Every key variable of every provider set to a distinct secret; returns the values."""
    values = set()
    for index, name in enumerate(key_variables()):
        value = f"{SECRET}{index:03d}-{name.lower()}"
        monkeypatch.setenv(name, value)
        values.add(value)
    return values


def leaked(listener: RecordingListener) -> list[tuple[str, str, str]]:
    return [
        (path, header, value)
        for path, headers in listener.requests
        for header, value in headers.items()
        if SECRET in value
    ]


async def _chat(provider: str, base: str, api_key: str | None = None) -> None:
    model = synalinks.LanguageModel(
        model=f"{provider}/m",
        api_base=base,
        api_key=api_key,
        retries=0,
        timeout=5,
        structured_output="prompt",
    )
    try:
        await model(MESSAGES, Answer)
    except LanguageModelError:
        pass  # some providers cannot parse the listener's answer; only what was sent counts


async def _embed(provider: str, base: str, api_key: str | None = None) -> None:
    model = synalinks.EmbeddingModel(
        model=f"{provider}/m", api_base=base, api_key=api_key, retries=0
    )
    try:
        await asyncio.wait_for(model(["a text"]), 10)
    except Exception:
        pass  # providers without embeddings refuse before or after sending: what was sent counts


async def test_no_server_key_reaches_a_custom_endpoint_for_any_openai_style_provider(server_keys):
    providers = openai_style_providers()
    with RecordingListener() as listener:
        await asyncio.gather(*(_chat(p, api_base(listener, p)) for p in providers))
        chat_requests = len(listener.requests)
        await asyncio.gather(*(_embed(p, api_base(listener, p)) for p in providers))
    assert leaked(listener) == []
    # the sweep was real: most providers' chat requests and many embeddings arrived
    assert chat_requests >= len(providers) // 2
    assert len(listener.requests) > chat_requests + len(CLIENTS)


@pytest.mark.parametrize(
    "provider,kind",
    [(provider, kind) for provider, kinds in sorted(CLIENTS.items()) for kind in sorted(kinds)],
)
async def test_a_guarded_provider_sends_the_endpoints_own_key_or_no_credential(
    server_keys, provider, kind, monkeypatch
):
    # a proxy in the environment (a dead one) is not used: it would connect past the guard
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    call = _chat if kind == "chat" else _embed
    with RecordingListener() as listener:
        await call(provider, api_base(listener, provider))
        without_key = list(listener.requests)
        listener.requests.clear()
        await call(provider, api_base(listener, provider), api_key="endpoint-own-key")
        with_key = list(listener.requests)
    assert without_key and with_key
    for path, headers in without_key:  # not even the placeholder: the guarded client carried it
        assert {"authorization", "api-key", "x-api-key"} & set(headers) == set(), (path, headers)
    for path, headers in with_key:
        assert headers["authorization"] == "Bearer endpoint-own-key", path
        assert NO_KEY not in headers.values()
    assert SECRET not in repr(without_key + with_key)


def test_the_endpoints_key_is_never_in_the_saved_config_or_repr():
    model = synalinks.LanguageModel(
        model="hosted_vllm/m", api_base="http://127.0.0.1:9/v1", api_key="sk-own", endpoint="lab"
    )
    embedder = synalinks.EmbeddingModel(
        model="hosted_vllm/m", api_base="http://127.0.0.1:9/v1", api_key="sk-own", endpoint="lab"
    )
    for obj in (model, embedder):
        config = obj.get_config()
        assert "sk-own" not in repr(config) and "sk-own" not in repr(obj)
        assert config["endpoint"] == "lab"
        assert type(obj).from_config(config).endpoint == "lab"


async def test_a_metadata_address_is_never_connected_to():
    model = synalinks.LanguageModel(
        model="openai/m", api_base="http://169.254.169.254/v1", retries=2, timeout=5
    )
    with pytest.raises(LanguageModelConfigError, match="link-local, metadata"):
        await model(MESSAGES, Answer)


async def test_loopback_is_refused_when_private_addresses_are_not_allowed():
    with RecordingListener() as listener:
        model = synalinks.LanguageModel(
            model="openai/m",
            api_base=f"http://localhost:{listener.port}/v1",
            allow_private_addresses=False,
            retries=0,
        )
        with pytest.raises(LanguageModelConfigError, match="loopback or private"):
            await model(MESSAGES, Answer)
    assert listener.requests == []


async def test_the_address_is_checked_when_the_connection_is_made(monkeypatch):
    """DNS rebinding: a name that resolved to the listener a moment ago resolves to the metadata
    address now; the next connection is refused, and nothing reaches an address unchecked."""
    real = socket.getaddrinfo
    answers = {"now": "127.0.0.1"}

    def rebinding(host, *args, **kwargs):
        if host == "models.rebind.test":
            return real(answers["now"], *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with RecordingListener() as listener:
        base = f"http://models.rebind.test:{listener.port}/v1"
        first = synalinks.LanguageModel(model="openai/m", api_base=base, retries=0)
        assert (await first(MESSAGES, Answer)).answer == "ok"
        answers["now"] = "169.254.169.254"
        second = synalinks.LanguageModel(model="openai/m", api_base=base, retries=0)
        with pytest.raises(LanguageModelConfigError, match="resolves to 169.254.169.254"):
            await second(MESSAGES, Answer)
    assert len(listener.requests) == 1


async def test_json_object_structured_output_sends_the_schema_as_llama_cpp_server_reads_it():
    with RecordingListener() as listener:
        model = synalinks.LanguageModel(
            model="openai/m", api_base=listener.url + "/v1", structured_output="json_object"
        )
        assert (await model(MESSAGES, Answer)).answer == "ok"
    (body,) = listener.bodies
    sent = json.loads(body)["response_format"]
    assert sent["type"] == "json_object"
    assert sent["schema"]["properties"]["answer"]["type"] == "string"
    assert model.get_config()["structured_output"] == "json_object"
    with pytest.raises(ValueError, match="structured_output must be one of"):
        synalinks.LanguageModel(model="openai/m", structured_output="grammar")
