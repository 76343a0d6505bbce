"""An attachment's bytes over HTTP, from its platform's own file host only.

Discord (a CDN URL the gateway event carried, signed in its query) and Slack
(``url_private_download``, which needs the bot token) hand an adapter a URL. A
URL is fetched only when its origin (scheme, host, port) is one of the
platform's file hosts or the origin of the configured API root (a proxy; the
emulator in tests), so a ``ref`` that points anywhere else (an internal address,
another site) is refused before any connection is made. Redirects are followed
by hand, each to an allowed origin only, and the secret headers (a bot token) go
to the first URL's origin only: nothing secret ever leaves for another host.

Sizes: a declared size over the limit is refused before any request, a
``Content-Length`` over it before the body is read; the caller counts what
arrives. Error messages name the platform and the HTTP status or the kind of
failure, never the URL (its query is a signature) or a header.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

import aiohttp
import structlog
import yarl

from .base import MediaTooLargeError, MediaUnavailableError
from .media import Attachment

__all__ = ["HttpFetcher", "Origin", "allowed_origins", "too_large"]

log = structlog.get_logger("hermes.media")

MAX_REDIRECTS = 3
CHUNK = 64 * 1024
CONNECT_TIMEOUT = 15.0
#: between two chunks of the body; the caller caps the whole download's time itself
READ_TIMEOUT = 60.0
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: a response check: raises ``MediaUnavailableError`` for an answer that is not the file
ResponseCheck = Callable[[aiohttp.ClientResponse, Attachment], None]


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str | yarl.URL) -> Origin | None:
        """The origin of an absolute http(s) URL that carries no credentials; None for anything else."""
        try:
            parsed = url if isinstance(url, yarl.URL) else yarl.URL(url)
        except (ValueError, TypeError):
            return None
        scheme = (parsed.scheme or "").lower()
        if scheme not in _DEFAULT_PORTS or not parsed.host or parsed.user is not None or parsed.password is not None:
            return None
        try:
            port = parsed.port or _DEFAULT_PORTS[scheme]
        except ValueError:
            return None
        return cls(scheme, parsed.host.lower().rstrip("."), port)


def allowed_origins(api_base_url: str, *hosts: str) -> frozenset[Origin]:
    """``https://<host>`` for each of the platform's file hosts, and the origin of its configured API root."""
    found = {Origin("https", host, 443) for host in hosts}
    base = Origin.of(api_base_url)
    if base is not None:
        found.add(base)
    return frozenset(found)


def too_large(size: int, limit: int) -> MediaTooLargeError:
    return MediaTooLargeError(f"the file is {_mb(size)}, more than the {_mb(limit)} allowed", size=size, limit=limit)


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n:,} bytes"


class HttpFetcher:
    """GETs of one platform's file URLs, on a session of its own (opened at the first fetch)."""

    def __init__(self, label: str, allowed: frozenset[Origin], *,
                 secret_headers: Callable[[], Mapping[str, str]] | None = None,
                 check: ResponseCheck | None = None) -> None:
        """``label``: the platform as a person reads it ("Discord"); ``secret_headers()``: what only the
        first URL's origin gets (``Authorization``); ``check``: refuses an answer that is not the file."""
        self._label = label
        self._allowed = allowed
        self._secret = secret_headers
        self._check = check
        self._session: aiohttp.ClientSession | None = None

    def allows(self, url: str) -> bool:
        return Origin.of(url) in self._allowed

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT, sock_read=READ_TIMEOUT)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    def _unavailable(self, why: str) -> MediaUnavailableError:
        return MediaUnavailableError(f"{self._label} would not hand the file over ({why})")

    async def fetch(self, attachment: Attachment, *, limit: int) -> AsyncIterator[bytes]:
        """The bytes of ``attachment`` (its ``ref`` a URL), as they arrive."""
        if attachment.size is not None and attachment.size > limit:
            raise too_large(attachment.size, limit)
        first = Origin.of(attachment.ref)
        if first is None or first not in self._allowed:
            log.warning("media.fetch_refused", platform=self._label, host=first.host if first else None)
            raise MediaUnavailableError(f"the file is not on {self._label}'s own file host; it was not downloaded")
        response = await self._open(yarl.URL(attachment.ref), first)
        async with response:
            if response.status != 200:
                raise self._unavailable(f"HTTP {response.status}")
            if self._check is not None:
                self._check(response, attachment)
            length = response.content_length
            if length is not None and length > limit:
                raise too_large(length, limit)
            try:
                async for chunk in response.content.iter_chunked(CHUNK):
                    yield chunk
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                raise self._unavailable(f"the download broke off: {type(exc).__name__}") from None

    async def _open(self, url: yarl.URL, first: Origin) -> aiohttp.ClientResponse:
        """The answer that is not a redirect, each hop checked against the allowed origins."""
        session = self._session_now()
        for _ in range(MAX_REDIRECTS + 1):
            origin = Origin.of(url)
            if origin is None or origin not in self._allowed:
                log.warning("media.redirect_refused", platform=self._label, host=origin.host if origin else None)
                raise self._unavailable("it redirected to another host")
            headers = dict(self._secret()) if self._secret is not None and origin == first else {}
            try:
                response = await session.get(url, headers=headers, allow_redirects=False)
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                raise self._unavailable(type(exc).__name__) from None
            if response.status not in _REDIRECTS:
                return response
            location = response.headers.get("Location", "")
            response.release()
            try:
                url = url.join(yarl.URL(location))
            except (ValueError, TypeError):
                raise self._unavailable("a malformed redirect") from None
        raise self._unavailable("too many redirects")
