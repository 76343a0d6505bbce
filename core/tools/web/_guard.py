"""The SSRF guard: what web_fetch may connect to.

A URL web_fetch is given is the choice of whatever text the model last read (a web page can
ask it to fetch ``http://169.254.169.254/...``), and the daemon runs next to things that
trust local callers: services on 127.0.0.1, the LAN, a cloud's metadata endpoint that hands
out the machine's credentials. So, unless ``tools.web.allow_private`` is on:

- only ``http`` and ``https``; no user name or password in the URL (``http://a.com@10.0.0.1/``
  reads as a.com to a person and goes to 10.0.0.1);
- a host written as an address is checked as the address the C library reads it as: so
  ``2130706433``, ``0x7f.1`` and ``017700000001`` are all 127.0.0.1;
- a name is resolved (``getaddrinfo``, in a thread) and refused when *any* of its addresses is
  not public: loopback, private, link-local, CGNAT (100.64/10), multicast, reserved,
  unspecified, an IPv4 address inside an IPv6 one (mapped, 6to4, Teredo, NAT64) that is one of
  those, and the cloud metadata addresses. The check runs in the connector's resolver and the
  connection goes to the addresses it returned, so the address checked is the address
  connected to: a DNS server that answers "public" for a check and "private" for the
  connection (rebinding) gets no second question;
- the metadata addresses are refused even with ``allow_private``.

The adapters have a guard of their own for media URLs (``adapters/_ssrf.py``); core may not
import adapters, hence this one.
"""

from __future__ import annotations

import re
import socket
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from yarl import URL

from ._settings import Address, WebSettings
from .errors import UrlRefusedError

__all__ = ["GuardedResolver", "UrlRefusedError", "address_refusal", "check_url", "refusal"]

#: never reachable, allow_private or not: each hands out a cloud machine's credentials or secrets
#: (AWS/GCP/Azure/OpenStack/Oracle IMDS, AWS IMDS over IPv6, ECS task and EKS pod credentials,
#: Alibaba Cloud's metadata, Azure's WireServer)
_METADATA = frozenset(ip_address(a) for a in (
    "169.254.169.254", "fd00:ec2::254", "169.254.170.2", "169.254.170.23", "fd00:ec2::23",
    "100.100.100.200", "168.63.129.16",
))
_CGNAT = ip_network("100.64.0.0/10")
_NAT64 = ip_network("64:ff9b::/96")
#: what a host made of digits, dots and hex may be: an IPv4 address in one of the old forms
_NUMERIC_HOST = re.compile(r"[0-9][0-9a-fA-FxX.]*")


def _embedded_v4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo, NAT64): packets reach that host."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(ip: Address) -> str | None:
    """Why ``ip`` is not public ("a loopback address", ...), or None when it is."""
    if ip in _METADATA:
        return "a cloud metadata address"
    if isinstance(ip, IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None:
            return address_refusal(inner)
        if ip.is_site_local:  # fec0::/10: deprecated, but still routed inside some networks
            return "a private address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_unspecified:  # 0.0.0.0 and :: reach this machine
        return "an unspecified address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, IPv4Address) and ip in _CGNAT:
        return "a shared (CGNAT) address"
    if ip.is_reserved:
        return "a reserved address"
    if ip.is_private:  # also the documentation and benchmarking networks: nobody serves pages there
        return "a private address"
    if not ip.is_global:
        return "a reserved address"
    return None


def refusal(ip: Address, settings: WebSettings) -> str | None:
    """Why web_fetch may not connect to ``ip`` under ``settings``, or None when it may."""
    inner = _embedded_v4(ip) if isinstance(ip, IPv6Address) else None
    if ip in _METADATA or inner in _METADATA:
        return "a cloud metadata address"
    if settings.allow_private:
        return None
    if settings.forbidden is not None:
        return "a forbidden address" if settings.forbidden(ip) else None
    return address_refusal(ip)


def _literal(host: str) -> Address | None:
    """The address ``host`` is written as, in any form the C library accepts; None for a name."""
    bare = host.strip("[]")
    if ":" in bare:  # an IPv6 address may carry a zone (fe80::1%eth0); a name's % is just a bad name
        bare = bare.partition("%")[0]
    try:
        return ip_address(bare)
    except ValueError:
        pass
    if _NUMERIC_HOST.fullmatch(bare):
        # inet_aton is the parser getaddrinfo uses for numbers: 2130706433, 0x7f.1, 0177.0.0.1
        try:
            return IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None


def check_url(url: URL, settings: WebSettings) -> str:
    """``url``'s host, once its scheme, its userinfo and (for an address) the address pass."""
    if url.scheme not in ("http", "https"):
        scheme = f"'{url.scheme}:'" if url.scheme else "a URL without a scheme"
        raise UrlRefusedError(f"web_fetch reads http and https URLs only, not {scheme}.")
    if url.user is not None or url.password is not None:
        raise UrlRefusedError("web_fetch does not fetch URLs with a user name or password in them.")
    host = url.raw_host
    if not host:
        raise UrlRefusedError("The URL has no host.")
    literal = _literal(host)
    if literal is not None:
        reason = refusal(literal, settings)
        if reason is not None:
            raise UrlRefusedError(f"{host} is {reason} ({literal}); web_fetch only reads public addresses.")
    return host


class GuardedResolver(AbstractResolver):
    """The system's resolver, refusing a name when any of its addresses is refused."""

    def __init__(self, settings: WebSettings) -> None:
        self._inner = ThreadedResolver()
        self._settings = settings

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        for result in found:
            ip = ip_address(result["host"].partition("%")[0])
            reason = refusal(ip, self._settings)
            if reason is not None:
                raise UrlRefusedError(f"{host} resolves to {reason} ({ip}); web_fetch only reads "
                                      "public addresses.")
        return found

    async def close(self) -> None:
        await self._inner.close()
