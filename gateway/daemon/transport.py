"""An httpx transport that sends through aiohttp.

Every message makes at least one model call, and over httpx's default
transport (httpcore over anyio streams) a model call costs about 1.7 times the
client CPU it costs over this one (``bench/transport.py``: 1.3-2.1 ms against
0.7-1.3 ms on a 2-vCPU VM). The model client keeps httpx's API; only the bytes
on the wire go through aiohttp. (python-telegram-bot's HTTP layer is swapped at
its own seam instead: ``adapters/telegram/_request.py``.) The ``httpx-aiohttp``
package's transport was measured too and not taken: about the same CPU, but it
reports refused or dropped connections as ``ConnectTimeout`` and ignores
``HTTP(S)_PROXY`` (bench/README.md, "Transport").

The contract of ``httpx.AsyncBaseTransport`` is kept: bodies are passed on as
httpx encoded them, responses come back undecoded (httpx does the
content-decoding), and aiohttp's failures are raised as the httpx exceptions
callers already handle (``ConnectError``, ``ReadTimeout``, ...). The body is a
stream, read as it arrives: a caller that streams (``client.send(...,
stream=True)``) can stop reading at a limit, and the connection is then closed
instead of being returned to the pool with the rest of the body unread.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from types import TracebackType

import aiohttp
import certifi
import httpx
from yarl import URL

__all__ = ["AiohttpTransport"]


@contextmanager
def _as_httpx_errors(request: httpx.Request) -> Iterator[None]:
    """aiohttp's failures as the httpx exceptions the model client handles."""
    try:
        yield
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx.ConnectTimeout(str(exc) or "timed out connecting", request=request) from exc
    except aiohttp.SocketTimeoutError as exc:
        raise httpx.ReadTimeout(str(exc) or "timed out reading the response", request=request) from exc
    except TimeoutError as exc:  # any other timeout aiohttp raises
        raise httpx.ReadTimeout("timed out", request=request) from exc
    except aiohttp.ClientConnectorError as exc:
        raise httpx.ConnectError(str(exc), request=request) from exc
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:
        raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request) from exc
    except aiohttp.ClientError as exc:
        raise httpx.NetworkError(str(exc) or type(exc).__name__, request=request) from exc


#: the longest the events of a streamed body (SSE) gather before they are read together (seconds)
_COALESCE_S = 0.25


class _Body(httpx.AsyncByteStream):
    """An aiohttp response's body as httpx reads it: chunk by chunk, as it arrives."""

    def __init__(self, resp: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._resp = resp
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        coalesce = self._resp.content_type == "text/event-stream"
        started = time.monotonic()
        with _as_httpx_errors(self._request):
            async for chunk in self._resp.content.iter_any():
                yield chunk
                if coalesce:
                    # A quarter of the time streamed so far, at most _COALESCE_S: what is held
                    # back at the end costs a short answer little of its time, a long one many reads.
                    await self._gather(min(_COALESCE_S, (time.monotonic() - started) / 4))

    async def _gather(self, seconds: float) -> None:
        """Let the next events of a stream gather in the socket's buffer for ``seconds``.

        A model streams one event per token, each its own packet: read as they come, every
        token wakes the event loop and costs a full read (measured: about 0.1 ms each, more
        than the whole rest of a turn for a 400-token answer). Paused, the kernel keeps them,
        and one read takes them all. The read timeout does not run while paused (aiohttp
        stops it).
        """
        conn = self._resp.connection
        protocol = conn.protocol if conn is not None else None
        if seconds <= 0 or protocol is None or not protocol.is_connected() or self._resp.content.at_eof():
            return
        protocol.pause_reading()
        try:
            await asyncio.sleep(seconds)
        finally:
            if protocol.is_connected():
                protocol.resume_reading()

    async def aclose(self) -> None:
        if self._resp.content.at_eof():
            self._resp.release()  # the whole body was read: the connection goes back to the pool
        else:
            self._resp.close()  # a reader that stopped early: the rest of the body is not waited for


def _timeout(request: httpx.Request) -> aiohttp.ClientTimeout:
    t = request.extensions.get("timeout") or {}
    connect, read, pool = t.get("connect"), t.get("read"), t.get("pool")
    # aiohttp's ``connect`` covers waiting for a pooled connection plus opening one.
    both = None if connect is None or pool is None else connect + pool
    return aiohttp.ClientTimeout(total=None, connect=both, sock_connect=connect, sock_read=read)


class AiohttpTransport(httpx.AsyncBaseTransport):
    """One aiohttp session per transport, opened on first use and again after ``aclose``.

    Reopening keeps the transport usable by a client built again around it after
    an earlier one closed it (httpx clients close their transport).
    """

    def __init__(self, *, max_connections: int = 100, trust_env: bool = True) -> None:
        self._max_connections = max_connections
        # HTTP(S)_PROXY / NO_PROXY, as httpx's own transport honours them. Read once: aiohttp's
        # trust_env re-reads and re-parses the environment on every request (~1.5 ms each).
        self._proxies = urllib.request.getproxies_environment() if trust_env else {}
        self._proxy_for: dict[tuple[str, str], tuple[str | None, aiohttp.BasicAuth | None]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | None = None

    def _proxy(self, url: httpx.URL) -> tuple[str | None, aiohttp.BasicAuth | None]:
        key = (url.scheme, url.host)
        found = self._proxy_for.get(key)
        if found is None:
            found = (None, None)
            proxy = self._proxies.get(url.scheme)
            if proxy and not urllib.request.proxy_bypass(url.host):  # NO_PROXY; once per host
                parsed = URL(proxy)
                auth = aiohttp.BasicAuth(parsed.user, parsed.password or "") if parsed.user else None
                found = (str(parsed.with_user(None)), auth)
            self._proxy_for[key] = found
        return found

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            if self._ssl is None:
                # certifi, as httpx uses, so behaviour does not depend on the image (httpx would also
                # honour SSL_CERT_FILE / SSL_CERT_DIR; this does not: bench/README.md, "Transport").
                self._ssl = ssl.create_default_context(cafile=certifi.where())
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._max_connections, ssl=self._ssl),
                auto_decompress=False,  # httpx decodes Content-Encoding itself
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
                cookie_jar=aiohttp.DummyCookieJar(),  # httpx keeps the cookies
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._open()
        body = await request.aread()
        proxy, proxy_auth = self._proxy(request.url) if self._proxies else (None, None)
        with _as_httpx_errors(request):
            resp = await session.request(
                request.method,
                str(request.url),
                headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
                data=body or None,
                timeout=_timeout(request),
                allow_redirects=False,  # httpx follows redirects when its caller asks it to
                proxy=proxy,
                proxy_auth=proxy_auth,
            )
        return httpx.Response(
            resp.status,
            headers=list(resp.raw_headers),
            stream=_Body(resp, request),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},  # aiohttp's client speaks HTTP/1.x only
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()
            # Let the connector's transports finish closing before the loop may stop.
            await asyncio.sleep(0)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.aclose()
