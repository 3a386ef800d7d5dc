"""Where a request to a custom endpoint may connect, checked when the connection is made.

A URL checked only when it is typed can still be turned elsewhere: its host name may resolve
to a public address when it is saved and to ``169.254.169.254`` (a cloud's instance
credentials) when a run connects (DNS rebinding). So the check sits in the one place that
cannot be talked around, the TCP connect: :class:`GuardedBackend` (an ``httpcore`` network
backend) resolves the host once, refuses the connection if any address it resolves to is
refused by the :class:`AddressPolicy`, and connects to an address it checked, never
resolving again. TLS still verifies the certificate against the host name (httpcore passes
the URL's host as ``server_hostname``), so connecting by address changes nothing else.

:class:`GuardedTransport` is an ``httpx`` transport on that backend. It also decides the
credential a request carries: the endpoint's own key as ``Authorization: Bearer …``, or no
credential header at all, whatever key a client library found elsewhere (an environment's
``OPENAI_API_KEY``). It reads no proxy settings from the environment (a proxy would connect
for us, past the check).

Example:

    transport = GuardedTransport(AddressPolicy(allow_private=False), credential=None)
    async with httpx.AsyncClient(transport=transport) as client:
        await client.get("http://169.254.169.254/latest/meta-data/")  # httpx.ConnectError
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

import httpcore
import httpx

#: Never a model endpoint, whatever the administrator allows: link-local networks (where
#: clouds serve instance metadata and credentials: 169.254.169.254, AWS's fd00:ec2::254),
#: and addresses that are not one machine (unspecified, multicast, broadcast).
NEVER_NETWORKS = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::/32"),
    ipaddress.ip_network("100.100.100.200/32"),  # Alibaba Cloud's metadata address
    ipaddress.ip_network("0.0.0.0/8"),
    ipaddress.ip_network("::/128"),
    ipaddress.ip_network("224.0.0.0/4"),
    ipaddress.ip_network("ff00::/8"),
    ipaddress.ip_network("255.255.255.255/32"),
)
#: Host names of metadata services (refused before any lookup).
NEVER_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
#: The words every refusal carries: :mod:`~training.engine.language_models.errors` treats an
#: error that says them as one no retry can fix.
REFUSED = "refused by the endpoint address rule"
#: Credential headers a client library may add; the transport sets the one it means itself.
CREDENTIAL_HEADERS = ("authorization", "api-key", "x-api-key")


def _plain(address: ipaddress.IPv4Address | ipaddress.IPv6Address):
    """An IPv4-mapped IPv6 address (``::ffff:169.254.169.254``) as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses a custom endpoint may connect to.

    Args:
        allow_private: loopback (127.0.0.0/8, ::1) and private networks (10/8, 172.16/12,
            192.168/16, fc00::/7, 100.64/10…) too; a self-hosted model on this machine or the
            local network needs it. Link-local and metadata addresses are refused either way.

    Example:
        >>> AddressPolicy(allow_private=False).refusal("127.0.0.1")
        '127.0.0.1 is a loopback or private address, which this server does not allow ...'
    """

    allow_private: bool = True

    def refusal(self, host: str) -> str | None:
        """Why a connection to ``host`` (an address, or a name before its lookup) is refused;
        None when it may go ahead. A name is checked again, by address, when it is resolved."""
        name = host.strip("[]").lower().rstrip(".")
        if name in NEVER_HOSTS:
            return f"{name} is a cloud metadata service, never a model endpoint"
        try:
            address = _plain(ipaddress.ip_address(name))
        except ValueError:
            return None  # a name: its addresses are checked when it is resolved
        if any(
            address in network for network in NEVER_NETWORKS if network.version == address.version
        ):
            return (
                f"{address} is a link-local, metadata or broadcast address, never a model endpoint"
            )
        if not self.allow_private and not address.is_global:
            return (
                f"{address} is a loopback or private address, which this server does not allow "
                "for model endpoints"
            )
        return None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, resolving each host once and connecting only to addresses
    the policy allows (see the module docstring).

    Args:
        policy: the :class:`AddressPolicy` every host and every address it resolves to must
            pass before a TCP connection is made.
        inner: the backend that makes the connection once the address is allowed (httpcore's
            ``AnyIOBackend`` by default).
    """

    def __init__(self, policy: AddressPolicy, inner: httpcore.AsyncNetworkBackend | None = None):
        self.policy = policy
        self._inner = inner or httpcore.AnyIOBackend()

    async def checked_addresses(self, host: str, port: int) -> list[str]:
        """``host``'s addresses, all checked; httpcore.ConnectError if any is refused (a name
        that resolves to a metadata address among others is not trusted with the rest)."""
        why = self.policy.refusal(host)
        if why:
            raise httpcore.ConnectError(f"{REFUSED}: {why}")
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host.strip("[]"), port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for address in addresses:
            why = self.policy.refusal(address)
            if why:
                raise httpcore.ConnectError(f"{REFUSED}: {host} resolves to {address}, and {why}")
        return addresses

    async def connect_tcp(
        self, host, port, timeout=None, local_address=None, socket_options=None
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.checked_addresses(host, port)
        last: Exception | None = None
        for address in addresses:  # each one checked above: no second lookup
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last or httpcore.ConnectError(f"{host} has no address")

    async def connect_unix_socket(self, *args, **kwargs):
        raise httpcore.ConnectError(f"{REFUSED}: unix sockets are not model endpoints")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport that connects through :class:`GuardedBackend` and sends exactly the
    endpoint's own credential (or none).

    Args:
        policy: where it may connect.
        credential: the endpoint's key (sent as ``Authorization: Bearer …``), or None: no
            credential header leaves, whatever the client put there.
    """

    def __init__(self, policy: AddressPolicy, credential: str | None = None):
        super().__init__(trust_env=False)
        # httpx builds its pool without a way to name the network backend; this is that pool
        # with the guarded backend (same TLS settings, no proxy).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            network_backend=GuardedBackend(policy),
        )
        self._credential = credential

    def __repr__(self) -> str:  # never the credential
        return f"{type(self).__name__}(credential={'set' if self._credential else 'none'})"

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        for name in CREDENTIAL_HEADERS:
            request.headers.pop(name, None)
        if self._credential:
            request.headers["Authorization"] = f"Bearer {self._credential}"
        return await super().handle_async_request(request)
