"""Downloading from a URL a client named, without letting that URL reach this machine or its network.

A URL in a request (the HTTP API's remote ``image_url``, where allowed) is the
sender's choice, and the daemon runs next to things that trust local callers:
``127.0.0.1`` services, the LAN, a cloud's metadata endpoint that hands out
credentials. So ``fetch_public`` connects only to public addresses:

- only ``http`` and ``https``;
- a host given as an address is checked as it is; a name is resolved and refused
  when *any* of its addresses is not public (loopback, private, link-local,
  multicast, reserved, unspecified, shared, an IPv4 address inside an IPv6 one that
  is one of those, and the metadata addresses 169.254.169.254 and fd00:ec2::254).
  The check runs in the connector's resolver, so the address checked is the
  address connected to: a name that resolves to a public address for the check
  and a private one for the connection (DNS rebinding) has no second resolution;
- redirects are followed by hand, at most ``max_redirects``, each target checked
  the same way; no proxy from the environment is used;
- ``Content-Length`` over ``limit`` is refused before the body is read, and the
  body is counted while it arrives; ``time_cap`` caps the whole download.

Errors are ``MediaError``s whose message names the host at most, never the URL
(its query may hold a signed token).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from yarl import URL

from .base import MediaTooLargeError, MediaUnavailableError

__all__ = ["Network", "RemoteRefusedError", "address_refusal", "fetch_public"]

Network = IPv4Network | IPv6Network
Address = IPv4Address | IPv6Address

#: never reachable, whatever a test allows: they hand out a cloud machine's credentials (AWS/GCP/
#: Azure/OpenStack/Oracle IMDS, AWS IMDS over IPv6, ECS and EKS credentials, Alibaba Cloud's metadata,
#: Azure's WireServer); the same list as core.tools.web's guard, which core keeps on its own side
_METADATA = frozenset(ip_address(a) for a in (
    "169.254.169.254", "fd00:ec2::254", "169.254.170.2", "169.254.170.23", "fd00:ec2::23",
    "100.100.100.200", "168.63.129.16",
))
_NAT64 = ip_network("64:ff9b::/96")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


class RemoteRefusedError(MediaUnavailableError):
    """The URL, or a redirect of it, leads somewhere the gateway does not download from."""


def _embedded_v4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo, NAT64): it reaches that host."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(ip: Address, allow: Sequence[Network] = ()) -> str | None:
    """Why ``ip`` may not be connected to ("a loopback address", ...), or None when it is public.

    ``allow``: networks taken as public anyway. For tests only (a test server listens on
    127.0.0.1); the daemon always passes nothing. The metadata addresses stay refused.
    """
    if ip in _METADATA:
        return "a cloud metadata address"
    if any(ip.version == net.version and ip in net for net in allow):
        return None
    if isinstance(ip, IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None:
            return address_refusal(inner, allow)
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_unspecified:  # 0.0.0.0 and :: connect to this machine
        return "an unspecified address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_private:
        return "a private address"
    if ip.is_reserved or not ip.is_global:
        return "a reserved address"
    return None


class _GuardedResolver(AbstractResolver):
    """The system's resolver, refusing a name when any of its addresses is not public."""

    def __init__(self, allow: Sequence[Network]) -> None:
        self._inner = ThreadedResolver()
        self._allow = allow

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        for result in found:
            reason = address_refusal(ip_address(result["host"].partition("%")[0]), self._allow)
            if reason is not None:
                raise RemoteRefusedError(f"{host} resolves to {reason}; only public addresses are downloaded from")
        return found

    async def close(self) -> None:
        await self._inner.close()


def _checked(url: URL, allow: Sequence[Network]) -> str:
    """``url``'s host, once its scheme and (for an address) the address itself may be used."""
    if url.scheme not in ("http", "https"):
        raise RemoteRefusedError("only http and https URLs are downloaded from")
    host = url.raw_host
    if not host:
        raise RemoteRefusedError("the URL has no host")
    try:
        literal = ip_address(host.strip("[]").partition("%")[0])
    except ValueError:
        return host  # a name: the resolver checks every address it has
    reason = address_refusal(literal, allow)
    if reason is not None:
        raise RemoteRefusedError(f"{host} is {reason}; only public addresses are downloaded from")
    return host


async def fetch_public(url: str, *, limit: int, time_cap: float, max_redirects: int = 3,
                       allow_networks: Sequence[Network] = ()) -> AsyncIterator[bytes]:
    """The body of ``url`` as it arrives, from public addresses only (see the module's docstring).

    Raises ``MediaTooLargeError`` when the declared or counted size passes ``limit``,
    ``RemoteRefusedError`` for a URL or redirect that leads to a refused address or scheme, and
    ``MediaUnavailableError`` for anything else (an HTTP error status, a timeout, a dropped
    connection). ``allow_networks``: for tests only, see ``address_refusal``.
    """
    try:
        current = URL(url)
    except (ValueError, TypeError):
        raise RemoteRefusedError("the URL cannot be read") from None
    host = "the host"
    connector = aiohttp.TCPConnector(resolver=_GuardedResolver(allow_networks), use_dns_cache=False)
    try:
        async with aiohttp.ClientSession(connector=connector, trust_env=False,
                                         timeout=aiohttp.ClientTimeout(total=time_cap)) as session:
            for _ in range(max_redirects + 1):
                host = _checked(current, allow_networks)
                async with session.get(current, allow_redirects=False) as resp:
                    if resp.status in _REDIRECTS:
                        location = resp.headers.get("Location")
                        if not location:
                            raise MediaUnavailableError(f"{host} redirected to nowhere")
                        current = current.join(URL(location))
                        continue
                    if resp.status != 200:
                        raise MediaUnavailableError(f"{host} answered HTTP {resp.status}")
                    declared = resp.content_length
                    if declared is not None and declared > limit:
                        raise MediaTooLargeError(f"the file at {host} is {declared} bytes, over the limit of "
                                                 f"{limit}", size=declared, limit=limit)
                    seen = 0
                    async for chunk in resp.content.iter_chunked(_CHUNK):
                        seen += len(chunk)
                        if seen > limit:
                            raise MediaTooLargeError(f"the file at {host} is over the limit of {limit} bytes",
                                                     size=None, limit=limit)
                        yield chunk
                    return
            raise MediaUnavailableError(f"{host} redirected more than {max_redirects} times")
    except TimeoutError:
        raise MediaUnavailableError(f"the download from {host} took more than {time_cap:g} s") from None
    except (aiohttp.ClientError, ValueError) as exc:
        # The exception's own text may quote the URL: only its kind is told.
        raise MediaUnavailableError(f"the download from {host} failed ({type(exc).__name__})") from None
