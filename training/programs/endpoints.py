"""Where a model may be sent: the ``api_base`` rules (pure: no Django, no network).

The server's provider keys (``OPENAI_API_KEY``…) never leave for a custom endpoint: the
engine calls a model with an ``api_base`` with that endpoint's own key or none
(:mod:`training.engine.language_models.endpoints.endpoint_client`). What is left to decide is where
requests may go, typed URL by typed URL:

- only ``http``/``https`` URLs with a host;
- link-local and cloud-metadata addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254,
  ``metadata.google.internal``) never, whatever else is allowed;
- loopback and private addresses (a model server on this machine or the local network) only
  for a *saved* endpoint (Settings → Endpoints), and only while the administrator allows them
  (``TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS``, on by default); a raw API base typed on a program
  must be a public address;
- the model's provider must be one whose requests the engine carries over its guarded client
  (:data:`~training.engine.language_models.endpoints.endpoint_client.CLIENTS`: OpenAI-compatible
  servers, vLLM, Ollama, LM Studio, llamafile, a LiteLLM proxy, Xinference).

These checks read the URL as typed. The same address rule is applied again by the engine when
each connection is made (:mod:`training.engine.language_models.endpoints.address_guard`), so a host
name that later resolves elsewhere (DNS rebinding) is refused there.

Example:

    check_api_base("http://localhost:11434", saved=True, allow_private=True)   # fine
    check_api_base("http://localhost:11434", saved=False, allow_private=True)  # EndpointRefused
    check_api_base("http://169.254.169.254/", saved=True, allow_private=True)  # EndpointRefused
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from training.engine.language_models.endpoints.address_guard import AddressPolicy
from training.engine.language_models.endpoints.endpoint_client import (
    CLIENTS,
    default_api_base,
    provider_of,
)

SCHEMES = {"http": 80, "https": 443}
SETTING = "TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS"
#: Names that are this machine whatever DNS says (refused with the loopback rule).
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class EndpointRefused(ValueError):
    """An ``api_base`` a model may not be sent to; the message says why and what to do."""


@dataclass(frozen=True)
class Endpoint:
    """An ``api_base`` reduced to what decides where requests go."""

    scheme: str
    host: str
    port: int
    path: str


def parse_endpoint(api_base: str) -> Endpoint:
    """The :class:`Endpoint` of an ``api_base``; EndpointRefused if it is not an http(s) URL
    with a host, or names a link-local / metadata address."""
    text = (api_base or "").strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise EndpointRefused(f"api_base {text!r} is not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise EndpointRefused(
            f"api_base {text!r}: only http:// and https:// endpoints are allowed"
            + (f", not {scheme}:" if scheme else "")
        )
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise EndpointRefused(f"api_base {text!r} has no host")
    why = AddressPolicy(allow_private=True).refusal(host)
    if why:
        raise EndpointRefused(f"api_base {text!r}: {why}")
    return Endpoint(scheme, host, port or SCHEMES[scheme], parts.path.rstrip("/"))


def is_private_host(host: str) -> bool:
    """Whether a typed host is a loopback or private address (or ``localhost``)."""
    return host in LOOPBACK_NAMES or AddressPolicy(allow_private=False).refusal(host) is not None


def check_api_base(api_base: str | None, *, saved: bool, allow_private: bool) -> None:
    """EndpointRefused unless requests may be sent to ``api_base`` as typed.

    Args:
        api_base: the URL (None or "" for the provider's own endpoint: always fine).
        saved: whether it is a saved endpoint's URL (Settings → Endpoints) rather than an
            API base typed on a program.
        allow_private: the administrator's ``TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS``.
    """
    if not (api_base or "").strip():
        return
    endpoint = parse_endpoint(api_base)
    if not is_private_host(endpoint.host):
        return
    text = api_base.strip()
    if not saved:
        raise EndpointRefused(
            f"api_base {text!r} is a loopback or private address: save it as an endpoint "
            "(Settings → Endpoints) and pick that endpoint on the program"
        )
    if not allow_private:
        raise EndpointRefused(
            f"api_base {text!r} is a loopback or private address, which this server does not "
            f"allow (the administrator's {SETTING} is off)"
        )


def check_default_base(model: str, *, allow_private: bool) -> None:
    """EndpointRefused when a model with no ``api_base`` would be sent to a loopback, private
    or link-local address anyway: its provider's default (``ollama/…`` →
    ``http://localhost:11434``) or an environment variable (``OPENAI_API_BASE``). Such an
    address is one nobody typed on the program and no endpoint names, so it passes the rule
    of a raw API base: never private (:func:`check_api_base` with ``saved=False``)."""
    base = default_api_base(model)
    if not base:
        return
    try:
        check_api_base(base, saved=False, allow_private=allow_private)
    except EndpointRefused:
        raise EndpointRefused(
            f"model {model!r} names no API base, so it would be sent to {base} (its "
            "provider's default address), a loopback or private address: save that server "
            "as an endpoint (Settings → Endpoints) and pick that endpoint on the program"
        ) from None


def check_provider(model: str, api_base: str | None) -> None:
    """EndpointRefused when a model at a custom ``api_base`` uses a provider prefix whose
    requests the engine does not carry over its guarded client."""
    if not (api_base or "").strip() or provider_of(model) in CLIENTS:
        return
    prefixes = ", ".join(f"{name}/" for name in sorted(CLIENTS))
    raise EndpointRefused(
        f"model {model!r} at a custom API base: use one of the prefixes {prefixes} (an "
        "OpenAI-compatible server, e.g. openai/<model> with http://localhost:8080/v1)"
    )
