"""python-telegram-bot's HTTP layer on aiohttp.

PTB's default ``HTTPXRequest`` spends most of a Bot API call's CPU inside httpx
and httpcore (about 2 ms per call on a small VM); every message costs a
``getUpdates`` share, a ``sendMessage`` and often a ``sendChatAction``. PTB
makes this layer swappable (``telegram.request.BaseRequest``); this one sends
the same requests (form fields, multipart when there are files) through
aiohttp's client and raises the errors PTB expects (``TimedOut``,
``NetworkError``), so everything above it is PTB's own code.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import urllib.request
from collections.abc import AsyncIterator

import aiohttp
import certifi
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData


def _pick(value: ODVInput[float], default: float | None) -> float | None:
    return default if isinstance(value, DefaultValue) else value


class AiohttpRequest(BaseRequest):
    def __init__(
        self,
        *,
        connection_pool_size: int,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
    ) -> None:
        self._pool_size = connection_pool_size
        self._read, self._write = read_timeout, write_timeout
        self._connect, self._pool = connect_timeout, pool_timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self._pool_size, ssl=ssl.create_default_context(cafile=certifi.where())
                ),
                # HTTP(S)_PROXY / NO_PROXY as PTB's httpx default honours them. Only when one is set:
                # aiohttp then re-reads the environment on every request, which costs about a millisecond.
                trust_env=bool({"http", "https", "all"} & urllib.request.getproxies_environment().keys()),
                cookie_jar=aiohttp.DummyCookieJar(),
            )

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()
            await asyncio.sleep(0)  # let the connector's transports close before the loop may stop

    @contextlib.asynccontextmanager
    async def download(self, url: str, *, read_timeout: float | None) -> AsyncIterator[aiohttp.ClientResponse]:
        """``async with`` it: the response to ``GET url``, its body not yet read (a file download,
        read in chunks by the caller). Raises aiohttp's errors, whose text may name the URL."""
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._connect, sock_read=read_timeout)
        async with session.get(url, timeout=timeout, headers={"User-Agent": self.USER_AGENT}) as resp:
            yield resp

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        connect = _pick(connect_timeout, self._connect)
        pool = _pick(pool_timeout, self._pool)
        # aiohttp has no write timeout; a stalled upload ends by the read timeout that follows it.
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=None if connect is None or pool is None else connect + pool,
            sock_connect=connect,
            sock_read=_pick(read_timeout, self._read),
        )
        data: aiohttp.FormData | dict[str, str] | None = None
        if request_data is not None:
            files = request_data.multipart_data
            if files:
                form = aiohttp.FormData()
                for name, value in request_data.json_parameters.items():
                    form.add_field(name, value)
                for name, (filename, content, mime) in files.items():
                    form.add_field(name, content, filename=filename, content_type=mime)
                data = form
            else:
                data = request_data.json_parameters
        try:
            async with session.request(method, url, data=data, timeout=timeout,
                                       headers={"User-Agent": self.USER_AGENT}) as resp:
                return resp.status, await resp.read()
        except aiohttp.ConnectionTimeoutError as err:
            # Named, like the connect errors below: such a request provably never left.
            raise TimedOut(f"aiohttp.ConnectionTimeoutError: {err}") from err
        except (TimeoutError, aiohttp.ServerTimeoutError) as err:
            raise TimedOut from err
        except aiohttp.ClientError as err:
            # The class name helps when the message is empty; aiohttp's messages name the host, not the URL.
            raise NetworkError(f"aiohttp.{type(err).__name__}: {err}") from err
