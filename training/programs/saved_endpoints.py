"""Saved endpoints: a person's (or, saved by an administrator, everyone's) model servers.

An :class:`~training.models.Endpoint` is a name, a URL and optionally its own key (stored
encrypted, :mod:`training.programs.endpoint_keys`). A program picks one by name: the name is
kept in its model's config (so an export names the endpoint, never the key) and
:func:`connect` puts the endpoint's current URL and key into a document's model configs only
where the models are called (the worker's load), in memory.

:func:`test_connection` asks the server which models it serves (``GET {url}/models``, the
OpenAI-compatible list; Ollama's native ``/api/tags`` too), bounded in time and size, over
the same guarded transport the engine calls models with.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from training.engine.language_models.endpoints.address_guard import AddressPolicy, GuardedTransport
from training.models import Endpoint
from training.programs import endpoint_keys, endpoints
from training.programs.lm import allow_private_endpoints
from training.programs.model_nodes import model_nodes

#: Seconds "Test connection" waits for the server's answer, all requests together.
TEST_SECONDS = 5.0
#: The most model names it lists, and the largest answer it reads.
TEST_MAX_MODELS = 50
TEST_MAX_BYTES = 1024 * 1024
NAME_MAX = 100


class EndpointError(ValueError):
    """An endpoint that cannot be saved or used; the message says why."""


def visible_to(user) -> Any:
    """The endpoints ``user`` may pick: their own and the shared ones."""
    return Endpoint.objects.filter(Q(owner=user) | Q(owner__isnull=True))


def resolve(user, name: str) -> Endpoint | None:
    """The endpoint ``name`` means for ``user``: their own first, else the shared one."""
    found = list(visible_to(user).filter(name=name))
    found.sort(key=lambda endpoint: endpoint.owner_id is None)
    return found[0] if found else None


def check_url(url: str) -> str:
    """The URL, stripped of a trailing slash; EndpointError when it may not be saved."""
    url = (url or "").strip().rstrip("/")
    try:
        endpoints.check_api_base(url, saved=True, allow_private=allow_private_endpoints())
    except endpoints.EndpointRefused as exc:
        raise EndpointError(str(exc)) from None
    if not url:
        raise EndpointError("an endpoint needs a URL, e.g. http://localhost:8080/v1")
    return url


def save(
    owner,
    name: str,
    url: str,
    key: str = "",
    *,
    shared: bool = False,
    structured_output: str = "json_object",
) -> Endpoint:
    """Save an endpoint (``shared``: for everyone, ``owner`` must be an administrator).

    Args:
        owner: who saves it.
        name: how programs name it (unique per owner, and among shared ones).
        url: its base URL (``http://localhost:8080/v1``), checked by ``check_url``.
        key: its own key, stored encrypted; "" for none.
        shared: saved for everyone (administrators only).
        structured_output: how its models are asked for structured output (the engine's
            ``LanguageModel(structured_output=…)``).

    Returns:
        The saved Endpoint.
    """
    name = (name or "").strip()
    if not name or len(name) > NAME_MAX:
        raise EndpointError(f"an endpoint needs a name of 1 to {NAME_MAX} characters")
    if shared and not owner.is_staff:
        raise EndpointError("only an administrator saves endpoints for everyone")
    url = check_url(url)
    scope = Endpoint.objects.filter(owner__isnull=True) if shared else owner.endpoints.all()
    if scope.filter(name=name).exists():
        raise EndpointError(f"an endpoint named {name!r} exists already")
    return Endpoint.objects.create(
        owner=None if shared else owner,
        name=name,
        url=url,
        encrypted_key=endpoint_keys.encrypt((key or "").strip()),
        structured_output=structured_output,
    )


def visible(user, pk: int) -> Endpoint | None:
    """The endpoint ``pk`` if ``user`` may pick it, else None."""
    return visible_to(user).filter(pk=pk).first()


def delete(user, pk: int) -> bool:
    """Delete an endpoint ``user`` may delete; False when there is none."""
    endpoint = deletable(user, pk)
    if endpoint is None:
        return False
    endpoint.delete()
    return True


def deletable(user, pk: int) -> Endpoint | None:
    """The endpoint ``user`` may delete: their own, or a shared one for an administrator."""
    endpoint = visible_to(user).filter(pk=pk).first()
    if endpoint is None or (endpoint.shared and not user.is_staff):
        return None
    return endpoint


def connect(document: Any, owner) -> Any:
    """``document`` (a sanitised engine document, changed in place and returned) with every
    model that names a saved endpoint given that endpoint's current URL and key.

    Only for where the models are called: the result holds keys and is never stored (what a
    run saves is ``get_config()``, which never has the key). EndpointError when a model names
    an endpoint ``owner`` has not saved, or whose key cannot be read.
    """
    for _kind, node in model_nodes(document):
        name = node["config"].get("endpoint")
        if not name:
            continue
        endpoint = resolve(owner, str(name))
        if endpoint is None:
            raise EndpointError(
                f"the program's model is on the endpoint {name!r}, which is not saved here: "
                "save an endpoint of that name in Settings → Endpoints"
            )
        try:
            key = endpoint_keys.decrypt(endpoint.encrypted_key)
        except endpoint_keys.KeyUnreadable as exc:
            raise EndpointError(f"endpoint {name!r}: {exc}") from None
        node["config"]["api_base"] = endpoint.url
        node["config"]["api_key"] = key
        node["config"]["allow_private_addresses"] = allow_private_endpoints()
        if _kind == "language_model":
            node["config"]["structured_output"] = endpoint.structured_output
    return document


@dataclass(frozen=True)
class ConnectionTest:
    """What "Test connection" found: the models listed, or why it failed."""

    ok: bool
    models: tuple[str, ...] = ()
    more: int = 0
    error: str = ""


def _names(body: Any) -> list[str]:
    if isinstance(body, dict) and isinstance(body.get("data"), list):  # OpenAI-compatible
        items = [item.get("id") for item in body["data"] if isinstance(item, dict)]
    elif isinstance(body, dict) and isinstance(body.get("models"), list):  # Ollama's tags
        items = [item.get("name") for item in body["models"] if isinstance(item, dict)]
    else:
        raise ValueError("the answer is not a model list")
    return [str(item)[:200] for item in items if item]


async def _list_models(endpoint: Endpoint, key: str | None) -> list[str]:
    import httpx

    transport = GuardedTransport(AddressPolicy(allow_private_endpoints()), credential=key)
    base = endpoint.url.rstrip("/")
    candidates = [f"{base}/models"]
    if not base.endswith("/v1"):
        candidates += [f"{base}/v1/models", f"{base}/api/tags"]
    async with httpx.AsyncClient(
        transport=transport, timeout=TEST_SECONDS, trust_env=False
    ) as client:
        last = ""
        for url in candidates:
            async with client.stream("GET", url) as response:
                if response.status_code == 404:
                    last = f"{url} answered 404"
                    continue
                if response.status_code in (401, 403):
                    raise ValueError(
                        f"the server refused the key (HTTP {response.status_code}): check the "
                        "endpoint's key"
                    )
                response.raise_for_status()
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > TEST_MAX_BYTES:
                        raise ValueError("the model list is larger than 1 MB")
            return _names(json.loads(body))
        raise ValueError(last or "no model list found")


def test_connection(endpoint: Endpoint) -> ConnectionTest:
    """Ask ``endpoint`` which models it serves, within :data:`TEST_SECONDS`."""
    key = None
    try:
        key = endpoint_keys.decrypt(endpoint.encrypted_key)
        check_url(endpoint.url)
        names = asyncio.run(asyncio.wait_for(_list_models(endpoint, key), TEST_SECONDS + 1))
    except TimeoutError:
        return ConnectionTest(False, error=f"no answer within {TEST_SECONDS:g} s")
    except Exception as exc:  # every failure is the server's answer, said in one line
        from training.engine.language_models.redaction import redact

        text = redact(" ".join(str(exc).split()))
        if key:
            text = text.replace(key, "[key]")
        text = text[:300] or type(exc).__name__
        return ConnectionTest(False, error=text)
    return ConnectionTest(
        True, models=tuple(names[:TEST_MAX_MODELS]), more=max(0, len(names) - TEST_MAX_MODELS)
    )
