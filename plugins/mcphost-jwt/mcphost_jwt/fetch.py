"""HTTP requests to the identity provider, bounded in size and time and guarded against SSRF.

A URL that reaches this module comes from configuration or from the issuer's metadata, which an
attacker may influence; so before any byte is sent the host name is resolved once, every address
it resolves to is checked (loopback, private, link-local, CGNAT, multicast, reserved, and IPv6
forms that embed such an IPv4 address are refused), and the connection goes to the checked
address, with the original name kept for the ``Host`` header and TLS (SNI and certificate
check). Redirects are never followed, proxies from the environment never used, and answers
larger than the limit or slower than the timeout are errors. ``allow_insecure`` (development
only) permits plain http and the non-public addresses.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: ``async def resolve(host, port) -> [address, ...]``; the default asks the system resolver.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

#: Largest answer read from the identity provider (discovery, JWKS, introspection).
MAX_RESPONSE_BYTES = 64 * 1024

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class IdentityProviderUnavailable(Exception):
    """The identity provider could not be asked: unreachable, slow, refused, or answered nonsense.

    Deliberately not a :class:`mcphost.Refused`: the host answers 503 without a challenge, so
    clients retry later instead of starting to re-authenticate.
    """


class UnsafeTarget(IdentityProviderUnavailable):
    """A URL that may not be fetched: plain http, or an address inside a private network."""


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, read whole (within the size limit)."""

    status: int
    headers: Mapping[str, str]
    body: bytes


def unsafe_reason(address: IPAddress) -> str | None:
    """Why ``address`` may not be contacted without ``allow_insecure``, or None when it is public."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return unsafe_reason(address.ipv4_mapped)
        if address in _NAT64:
            return unsafe_reason(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if address in _SIX_TO_FOUR or address in _NAT64_LOCAL or address.teredo is not None:
            return "an IPv6 transition address (6to4, Teredo, local NAT64)"
        if address in _IPV4_COMPATIBLE:
            return "an IPv4-compatible IPv6 address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "the unspecified address"
    if not address.is_global:
        return "a private or reserved address"
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, IPv4 and IPv6, as text (scope ids dropped)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for *_, sockaddr in infos:
        address = str(sockaddr[0]).split("%", 1)[0]
        if address not in seen:
            seen.append(address)
    return seen


class GuardedFetcher:
    """Fetches identity-provider URLs with the checks in the module docstring.

    One connection pool per origin name, so a TLS connection checked for one host name is never
    reused for another that happens to share its address.
    """

    def __init__(self, *, allow_insecure: bool = False, timeout: float = 5.0, ca_file: str | None = None,
                 resolver: Resolver | None = None, max_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.allow_insecure = allow_insecure
        self.timeout = timeout
        self.ca_file = ca_file
        self.resolver = resolver or system_resolver
        self.max_bytes = max_bytes
        self._clients: dict[tuple[str, str, int], httpx.AsyncClient] = {}
        self._ssl: ssl.SSLContext | None = None

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            context = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else \
                ssl.create_default_context()
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            self._ssl = context
        return self._ssl

    def _client(self, scheme: str, host: str, port: int) -> httpx.AsyncClient:
        key = (scheme, host, port)
        client = self._clients.get(key)
        if client is None:
            client = httpx.AsyncClient(verify=self._ssl_context(), trust_env=False, follow_redirects=False,
                                       timeout=httpx.Timeout(self.timeout),
                                       limits=httpx.Limits(max_connections=16, max_keepalive_connections=4))
            self._clients[key] = client
        return client

    async def addresses(self, url: httpx.URL) -> list[str]:
        """The checked addresses to connect to for ``url``; raises UnsafeTarget when any is refused."""
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise UnsafeTarget(f"refusing to fetch {_shown(url)}: only https URLs are fetched")
        if scheme == "http" and not self.allow_insecure:
            raise UnsafeTarget(f"refusing to fetch {_shown(url)}: plain http (allow_insecure is off)")
        host = url.host
        if not host:
            raise UnsafeTarget(f"refusing to fetch {_shown(url)}: no host")
        port = url.port or (443 if scheme == "https" else 80)
        try:
            literal: IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            found = [str(literal)]
        else:
            try:
                found = list(await self.resolver(host, port))
            except OSError as exc:
                raise IdentityProviderUnavailable(f"cannot resolve {host}: {exc}") from None
            if not found:
                raise IdentityProviderUnavailable(f"{host} resolves to no address")
        if not self.allow_insecure:
            for text in found:
                try:
                    address = ipaddress.ip_address(text)
                except ValueError:
                    raise UnsafeTarget(f"refusing to fetch {_shown(url)}: {text!r} is not an address") from None
                reason = unsafe_reason(address)
                if reason is not None:
                    raise UnsafeTarget(f"refusing to fetch {_shown(url)}: {host} is at {address}, {reason} "
                                       "(allow_insecure permits this, for development only)")
        return found

    async def request(self, method: str, url: str, *, headers: Mapping[str, str] | None = None,
                      data: Mapping[str, str] | None = None) -> Answer:
        """Send one request and read the whole answer; any failure is IdentityProviderUnavailable."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise UnsafeTarget(f"refusing to fetch an invalid URL: {exc}") from None
        try:
            async with asyncio.timeout(self.timeout):
                return await self._request(method, parsed, headers or {}, data)
        except TimeoutError:
            raise IdentityProviderUnavailable(f"{_shown(parsed)} did not answer within {self.timeout:g}s") from None

    async def _request(self, method: str, url: httpx.URL, headers: Mapping[str, str],
                       data: Mapping[str, str] | None) -> Answer:
        found = await self.addresses(url)
        client = self._client(url.scheme, url.host, url.port or 0)
        # identity: a compressed answer could expand far past the size limit in one chunk.
        sent = {"host": url.netloc.decode("ascii"), "accept": "application/json", "accept-encoding": "identity",
                **headers}
        extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
        last: Exception | None = None
        for address in found:
            request = client.build_request(method, url.copy_with(host=address), headers=sent, data=data,
                                           extensions=extensions)
            try:
                response = await client.send(request, stream=True)
            except httpx.ConnectError as exc:
                last = exc  # try the next address
                continue
            except httpx.HTTPError as exc:
                raise IdentityProviderUnavailable(f"{_shown(url)}: {type(exc).__name__}: {exc}") from None
            try:
                return await self._read(url, response)
            finally:
                await response.aclose()
        raise IdentityProviderUnavailable(f"cannot connect to {_shown(url)}: {last}")

    async def _read(self, url: httpx.URL, response: httpx.Response) -> Answer:
        if 300 <= response.status_code < 400:
            raise IdentityProviderUnavailable(f"{_shown(url)} answered {response.status_code} (a redirect; "
                                              "redirects are not followed)")
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            raise IdentityProviderUnavailable(f"{_shown(url)}: compressed answer although identity was asked for")
        length = response.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            raise IdentityProviderUnavailable(f"{_shown(url)}: answer of {length} bytes is over the "
                                              f"{self.max_bytes}-byte limit")
        body = bytearray()
        try:
            async for chunk in response.aiter_raw():
                body.extend(chunk)
                if len(body) > self.max_bytes:
                    raise IdentityProviderUnavailable(f"{_shown(url)}: answer is over the {self.max_bytes}-byte "
                                                      "limit")
        except httpx.HTTPError as exc:
            raise IdentityProviderUnavailable(f"{_shown(url)}: {type(exc).__name__}: {exc}") from None
        return Answer(response.status_code, {k.lower(): v for k, v in response.headers.items()}, bytes(body))


def _shown(url: httpx.URL) -> str:
    """The URL without query or credentials, for messages and logs."""
    return str(url.copy_with(query=None, fragment=None, username=None, password=None))
