"""Where a model may be sent: the ``api_base`` policy (pure: no Django, no network).

The worker holds provider keys (``OPENAI_API_KEY``…) in its environment, and litellm sends
them with every request to whatever ``api_base`` a model names. So a server-held key only ever
goes to a provider's own endpoint: a model with no ``api_base``. A custom ``api_base`` is
allowed only when an administrator lists it in ``TRAINBOARD_ALLOWED_API_BASES`` (those
endpoints are trusted with the server's keys, e.g. a company proxy or a local Ollama), and
even a listed one is refused when it is not ``http``/``https`` or names a link-local or
cloud-metadata address (169.254.0.0/16, fe80::/10, ``metadata.google.internal``).

Example:

    allowed = parse_allowed("http://localhost:11434, https://proxy.example.com/v1")
    check_api_base("http://localhost:11434", allowed)        # fine
    check_api_base("http://attacker.example:8080/v1", allowed)  # EndpointRefused
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

SCHEMES = {"http": 80, "https": 443}
#: Never a model endpoint: link-local addresses, where clouds serve instance credentials.
BLOCKED_NETWORKS = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::/32"),
)
BLOCKED_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
SETTING = "TRAINBOARD_ALLOWED_API_BASES"


class EndpointRefused(ValueError):
    """An ``api_base`` a model may not be sent to; the message says why and what to do."""


@dataclass(frozen=True)
class Endpoint:
    """An ``api_base`` reduced to what decides where requests go."""

    scheme: str
    host: str
    port: int
    path: str

    def covers(self, other: Endpoint) -> bool:
        """Same scheme, host and port, and ``other``'s path at or under this one's."""
        if (self.scheme, self.host, self.port) != (other.scheme, other.host, other.port):
            return False
        return not self.path or other.path == self.path or other.path.startswith(self.path + "/")


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
    if host in BLOCKED_HOSTS or _blocked_address(host):
        raise EndpointRefused(
            f"api_base {text!r}: link-local and cloud-metadata addresses are never model endpoints"
        )
    return Endpoint(scheme, host, port or SCHEMES[scheme], parts.path.rstrip("/"))


def _blocked_address(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in BLOCKED_NETWORKS)


def parse_allowed(value: str | Iterable[str] | None) -> tuple[Endpoint, ...]:
    """The administrator's list (comma/space separated text, or a list of URLs)."""
    if value is None:
        return ()
    items = value.replace(",", " ").split() if isinstance(value, str) else list(value)
    return tuple(parse_endpoint(item) for item in items if str(item).strip())


def check_api_base(api_base: str | None, allowed: Iterable[Endpoint]) -> None:
    """EndpointRefused unless ``api_base`` is empty (the provider's own endpoint) or covered
    by an ``allowed`` endpoint.

    Args:
        api_base: the model's ``api_base`` (None or "" for the provider's default).
        allowed: the endpoints an administrator trusts with the server's keys.
    """
    if not (api_base or "").strip():
        return
    endpoint = parse_endpoint(api_base)
    if not any(entry.covers(endpoint) for entry in allowed):
        raise EndpointRefused(
            f"api_base {api_base.strip()!r} is not an endpoint this server sends requests "
            "to: the server's provider keys only go to the provider's own endpoint (leave "
            "the API base empty) or to an endpoint an administrator lists in "
            f"{SETTING}"
        )
