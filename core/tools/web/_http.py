"""One guarded GET: redirects followed by hand and re-checked, a size cap, a time cap.

A fresh ``ClientSession`` per fetch: web_fetch is called a few times a turn at most, and a
session of its own means no connection, cookie or DNS answer outlives the call. The session
takes nothing from the environment (``trust_env=False``): a proxy would resolve names itself,
past the guard, and ``~/.netrc`` would add the daemon's credentials. Cookies are not kept
between the hops of a redirect chain either.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Literal

import aiohttp
import structlog
from yarl import URL

from core.media import SNIFF_BYTES, human_size

from .._base import ToolError
from ._content import Kind, declared_kind, sniffed_kind
from ._guard import GuardedResolver, UrlRefusedError, check_url
from ._settings import WebSettings

__all__ = ["MAX_REDIRECTS", "Cut", "Fetched", "fetch", "read_capped"]

log = structlog.get_logger("hermes.tools.web")

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024
_ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5"
#: a body still arriving this long before the time cap is cut there, so that what came is kept
_READ_MARGIN = 0.25

#: why a body was cut: it was longer than ``max_download_bytes``, or still arriving at the time cap
Cut = Literal["size", "time"]


@dataclass(frozen=True)
class Fetched:
    """What one fetch brought back."""

    #: where the body came from, after redirects
    url: str
    status: int
    #: "html", "text" (body read) or "binary" (body not read: described instead)
    kind: Kind
    #: the type, lower case without parameters: the sniffed one when the bytes overruled the header
    mime: str
    charset: str | None
    body: bytes
    #: bytes in all: the declared length or the count; None when unknown (a body not read)
    size: int | None
    #: why the body is only its first part (None: it is whole)
    cut: Cut | None
    redirects: int


async def read_capped(resp: aiohttp.ClientResponse, cap: int, body: bytearray | None = None) -> bool:
    """Read the rest of ``resp`` into ``body``, at most ``cap`` bytes in all; True when some was left.

    The bytes counted are the decoded ones (aiohttp inflates gzip and deflate in bounded steps as
    they are read), so a small compressed body that inflates to gigabytes stops at ``cap`` too.
    """
    buffer = bytearray() if body is None else body
    async for chunk in resp.content.iter_chunked(_CHUNK):
        room = cap - len(buffer)
        if len(chunk) > room:
            buffer += chunk[:room]
            return True
        buffer += chunk
    return False


def _status_error(host: str, status: int, reason: str | None) -> ToolError:
    hint = {401: " (the page needs a login)", 403: " (the site refuses this request; it may need a login or "
            "block automated readers)", 404: " (there is no page at this URL)", 410: " (the page is gone)",
            429: " (too many requests: try again later)"}.get(status, "")
    if status >= 500:
        hint = " (a server error: try again later or another source)"
    # The reason phrase is the server's text: short and printable, or left out.
    phrase = reason if reason and len(reason) <= 60 and reason.isprintable() else ""
    return ToolError(f"{host} answered HTTP {status} {phrase}".rstrip() + f"{hint}.")


def _too_large(host: str, declared: int, cap: int) -> ToolError:
    return ToolError(f"The response from {host} is {human_size(declared)}, more than web_fetch reads "
                     f"({human_size(cap)}); try a more specific URL.")


async def _body(resp: aiohttp.ClientResponse, host: str, settings: WebSettings,
                deadline: float) -> tuple[Kind, str, bytes, Cut | None]:
    """The response's kind, type, body and why it was cut; a binary body is not read.

    The rest of a body (past its first bytes) still arriving near ``deadline`` is cut there: a
    slow site's first part is worth more to the model than an error."""
    mime = resp.content_type.lower() if "Content-Type" in resp.headers else ""
    declared = declared_kind(mime)
    length = resp.content_length
    if declared == "binary":
        return "binary", mime, b"", None
    if declared is not None and length is not None and length > settings.max_download_bytes:
        raise _too_large(host, length, settings.max_download_bytes)
    body = bytearray()
    async for chunk in resp.content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) >= SNIFF_BYTES:
            break
    kind, shown = sniffed_kind(declared, mime, bytes(body[:SNIFF_BYTES]))
    if kind == "binary":
        return kind, shown, b"", None
    if declared is None and length is not None and length > settings.max_download_bytes:
        raise _too_large(host, length, settings.max_download_bytes)
    if len(body) > settings.max_download_bytes:
        del body[settings.max_download_bytes:]
        return kind, shown, bytes(body), "size"
    try:
        async with asyncio.timeout_at(deadline - _READ_MARGIN):
            cut: Cut | None = "size" if await read_capped(resp, settings.max_download_bytes, body) else None
    except TimeoutError:
        cut = "time"
    return kind, shown, bytes(body), cut


async def _fetch(session: aiohttp.ClientSession, url: URL, settings: WebSettings, deadline: float) -> Fetched:
    current = url
    for hop in range(MAX_REDIRECTS + 1):
        host = check_url(current, settings)
        async with session.get(current, allow_redirects=False) as resp:
            if resp.status in _REDIRECTS:
                location = resp.headers.get("Location")
                if not location:
                    raise ToolError(f"{host} answered with a redirect (HTTP {resp.status}) to nowhere.")
                try:
                    current = current.join(URL(location))
                except ValueError:
                    raise ToolError(f"{host} redirected to a URL that cannot be read.") from None
                continue
            if resp.status >= 300:
                raise _status_error(host, resp.status, resp.reason)
            kind, mime, body, cut = await _body(resp, host, settings, deadline)
            size = len(body) if kind != "binary" and cut is None else resp.content_length
            return Fetched(url=str(current), status=resp.status, kind=kind, mime=mime, charset=resp.charset,
                           body=body, size=size, cut=cut, redirects=hop)
    raise UrlRefusedError(f"The URL redirected more than {MAX_REDIRECTS} times; web_fetch stopped there.")


def _session(settings: WebSettings) -> aiohttp.ClientSession:
    # No DNS cache: every new connection is resolved, and so checked, again.
    connector = aiohttp.TCPConnector(resolver=GuardedResolver(settings), use_dns_cache=False)
    return aiohttp.ClientSession(connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar(),
                                 headers={"User-Agent": settings.user_agent, "Accept": _ACCEPT})


async def fetch(url: str, settings: WebSettings) -> Fetched:
    """GET ``url`` within the guard and the caps of ``settings``; every failure is a ``ToolError``
    that names the host at most (a URL's query may hold a token, and errors reach logs)."""
    try:
        start = URL(url)
    except (ValueError, TypeError):
        raise ToolError("That is not a URL web_fetch can read.") from None
    host = start.raw_host or "the site"
    try:
        check_url(start, settings)  # before a session exists: a refused URL costs nothing
        deadline = asyncio.get_running_loop().time() + settings.timeout
        async with asyncio.timeout_at(deadline), _session(settings) as session:
            fetched = await _fetch(session, start, settings, deadline)
    except UrlRefusedError as exc:
        log.info("web.fetch_refused", host=host, reason=str(exc))
        raise
    except ToolError as exc:  # a status, a size: the message names the host at most
        log.info("web.fetch_failed", host=host, error=str(exc))
        raise
    except TimeoutError:
        log.info("web.fetch_failed", host=host, error="timeout")
        raise ToolError(f"{host} did not answer in time (web_fetch gives up after {settings.timeout:g} s).") from None
    except aiohttp.ClientError as exc:
        log.info("web.fetch_failed", host=host, error=type(exc).__name__)
        raise ToolError(_client_error(host, exc)) from None
    except ValueError:  # a malformed URL that yarl or aiohttp only notice while connecting
        raise ToolError("That is not a URL web_fetch can read.") from None
    log.info("web.fetched", host=URL(fetched.url).raw_host, status=fetched.status, kind=fetched.kind,
             bytes=len(fetched.body), cut=fetched.cut, redirects=fetched.redirects)
    return fetched


def _client_error(host: str, exc: aiohttp.ClientError) -> str:
    """What went wrong, without the exception's own text (it may quote the whole URL)."""
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"Could not find {host}: the name does not resolve. Check the spelling of the address."
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return f"Could not connect to {host} securely: its TLS certificate or handshake failed."
    if isinstance(exc, aiohttp.ClientConnectorError):
        errno = exc.os_error.errno
        reason = os.strerror(errno).lower() if errno else "the connection failed"
        return f"Could not connect to {host}: {reason}."
    if isinstance(exc, aiohttp.InvalidURL):
        return "That is not a URL web_fetch can read."
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return f"{host} closed the connection without an answer."
    if isinstance(exc, aiohttp.ClientPayloadError):
        return f"The response from {host} broke off or could not be decoded."
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"{host} sent a response that could not be read."
    return f"Fetching from {host} failed ({type(exc).__name__})."
