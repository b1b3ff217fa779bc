"""Who a request comes from behind reverse proxies: the one rule for the host and its plugins.

A proxy that ``server.forwarded_allow_ips`` trusts reports the client it relays for: RFC 7239's
``Forwarded: for=`` first, then ``X-Forwarded-For`` (only when there is no ``Forwarded`` that names
anyone, so a proxy writing only ``Forwarded`` leaves a client no way to pick its own address with
``X-Forwarded-For``). The hops are read from the right, skipping trusted proxies, so a client
cannot name itself by sending either header through a proxy that appends to it. A request from
any other peer is keyed by its socket address, whatever headers it sends.

Written here rather than taken from a library: Hypercorn's ``ProxyFixMiddleware`` reads one header
at a fixed depth, and the console needs the same answer outside the ASGI stack.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

#: Headers a reverse proxy adds: a request carrying one was relayed, whatever address it came from.
FORWARDING_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip")


def forwarded_for(value: str) -> list[str]:
    """The ``for=`` values of a ``Forwarded`` header (RFC 7239), in order, unquoted.

    Elements are separated by commas and pairs by semicolons, except inside a quoted string
    (``for="[2001:db8::1]:4711"``), whose backslash escapes are undone.
    """
    hops: list[str] = []
    name: list[str] = []
    text: list[str] = []
    current = name
    quoted = escaped = False

    def pair() -> None:
        if "".join(name).strip().lower() == "for" and "".join(text).strip():
            hops.append("".join(text).strip())
        name.clear()
        text.clear()

    for char in value:
        if quoted:
            if escaped:
                text.append(char)
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
            else:
                text.append(char)
        elif char == '"' and current is text:
            quoted = True
        elif char in ",;":
            pair()
            current = name
        elif char == "=" and current is name:
            current = text
        else:
            current.append(char)
    pair()
    return hops


def forwarded_hops(headers: Mapping[str, str]) -> list[str]:
    """The addresses the proxies reported, farthest first: ``Forwarded`` when it names any, else
    ``X-Forwarded-For``. ``headers`` by lower-case name."""
    forwarded = headers.get("forwarded")
    if forwarded:
        hops = forwarded_for(forwarded)
        if hops:
            return hops
    return [hop.strip() for hop in headers.get("x-forwarded-for", "").split(",") if hop.strip()]


def relayed(headers: Mapping[str, str]) -> bool:
    """Whether a proxy says it relayed the request (any of :data:`FORWARDING_HEADERS`)."""
    return any(name in headers for name in FORWARDING_HEADERS)


class TrustedProxies:
    """The peers ``server.forwarded_allow_ips`` trusts (``*``: any) and the client they report."""

    def __init__(self, allowed: Iterable[str]) -> None:
        allowed = list(allowed)
        self.any = "*" in allowed
        self.networks = [ipaddress.ip_network(item.strip(), strict=False) for item in allowed
                         if item.strip() not in ("*", "")]
        #: :attr:`active`, kept for the per-request path.
        self.trusting = self.active

    @property
    def active(self) -> bool:
        """Whether any peer is trusted."""
        return self.any or bool(self.networks)

    def trusts(self, host: str) -> bool:
        if self.any:
            return True
        try:
            address = ipaddress.ip_address(host.strip("[]").split("%")[0])
        except ValueError:
            return False
        return any(address in network for network in self.networks)

    def client(self, peer_host: str, peer_port: int, headers: Mapping[str, str]) -> str:
        """The client as ``host:port``: the peer's, or behind a trusted proxy the nearest address
        the proxies reported that is not a trusted proxy itself (reported ones get port 0)."""
        peer = f"{peer_host}:{peer_port}"
        if not self.active or not self.trusts(peer_host):
            return peer
        hops = forwarded_hops(headers)
        for hop in reversed(hops):  # nearest first: the first one not a trusted proxy is the client
            if not self.trusts(_host_of(hop)):
                return with_port(hop)
        return with_port(hops[0]) if hops else peer


def _host_of(hop: str) -> str:
    return with_port(hop).rpartition(":")[0]


def with_port(hop: str) -> str:
    """A forwarded address (``1.2.3.4``, ``1.2.3.4:5``, ``[::1]:5``, ``::1``) as ``host:0``."""
    if hop.startswith("["):
        host = hop[1:].partition("]")[0]
        return f"[{host}]:0"
    if hop.count(":") == 1:
        hop = hop.partition(":")[0]
    return f"[{hop}]:0" if ":" in hop else f"{hop[:255]}:0"


def is_loopback(address: str | None) -> bool:
    """Whether ``address`` (``host``, ``host:port`` or ``[v6]:port``) is a loopback address."""
    if not address:
        return False
    host = address
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


__all__ = ["FORWARDING_HEADERS", "TrustedProxies", "forwarded_for", "forwarded_hops", "is_loopback", "relayed",
           "with_port"]
