"""The daemon's one HTTP server (API, webhooks, health, metrics), with its limits.

Nothing a client does may hold the daemon's file descriptors for long or without bound:

- ``keepalive_timeout``: aiohttp (3.14) starts its keep-alive timer when a connection is made and
  restarts it after each response, and closes a connection that is still waiting for a complete
  request when it fires. So a connection that sends nothing, or half a header, is closed after it,
  as is one idle between requests. A request being answered is never cut by it.
- ``max_connections``: aiohttp has no setting for a cap. ``_CappedServer`` (aiohttp's own
  ``web.Server``) counts the connections it is asked to handle and sees lost; one beyond the cap
  gets a bare protocol that answers 503 and closes, so a flood costs a moment of one descriptor
  per connection instead of the daemon's limit.
  At 0 (the default), the cap is half the open-file limit: the other half stays for state.db, the model client
  and the platforms.
- ``backlog`` (the listening socket's accept queue) and ``max_request_bytes`` (aiohttp's
  ``client_max_size``: a larger body is answered 413).
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import structlog
from aiohttp import web

from adapters.api_server import ApiServerSettings
from gateway.config import LoadedConfig
from gateway.errors import ConfigError
from gateway.http.fds import open_file_limit

__all__ = ["HttpServer", "connection_cap", "start_http_server"]

log = structlog.get_logger("hermes.http")

#: the cap when the open-file limit is unlimited
UNLIMITED_FDS_CAP = 32_768
#: the smallest cap derived from a (very low) open-file limit
MIN_CAP = 16
#: open requests get this long at shutdown (aiohttp waits 60 s by default): the stop has a bound to keep
SHUTDOWN_TIMEOUT = 5.0

_BUSY_TEXT = b"Too many open connections; retry shortly.\n"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: " + str(len(_BUSY_TEXT)).encode() + b"\r\n\r\n" + _BUSY_TEXT
)


def connection_cap(setting: int, fd_limit: int | None) -> int:
    """``max_connections`` as set, or (0) half the open-file limit."""
    if setting > 0:
        return setting
    if fd_limit is None:
        return UNLIMITED_FDS_CAP
    return max(MIN_CAP, fd_limit // 2)


class _Refusal(asyncio.Protocol):
    """A connection beyond the cap: answered 503 and closed, without a request handler."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(_BUSY)
        transport.close()  # once the 503 is flushed

    def data_received(self, data: bytes) -> None:
        pass  # the request is not read: the answer is the same whatever it asks


class _CappedServer(web.Server):
    """aiohttp's server, counting the connections it handles; one beyond ``cap`` is refused."""

    cap: int
    open_connections: int
    refused: int

    # The event loop calls this for each accepted connection (the protocol factory). Counted here
    # rather than in connection_made: the loop accepts a whole round of connections before any of
    # them is made, and the cap must hold within a round too.
    def __call__(self) -> Any:
        if self.open_connections >= self.cap:
            self.refused += 1
            # Identical lines on purpose: the log's repeat limit folds a flood of them into one.
            log.warning("http.connection_refused", reason="max_connections reached", max_connections=self.cap)
            return _Refusal()
        self.open_connections += 1
        return super().__call__()

    def connection_lost(self, handler: Any, exc: BaseException | None = None) -> None:
        self.open_connections -= 1
        super().connection_lost(handler, exc)


class _CappedRunner(web.AppRunner):
    def __init__(self, app: web.Application, *, cap: int, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.cap = cap

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The one seam into aiohttp: Application._make_handler builds a plain web.Server and offers
        # no way to choose its class, so that object is given the counting subclass (methods only;
        # its counters are set here). A future aiohttp building something else fails loudly here.
        if type(server) is not web.Server:
            raise RuntimeError(f"aiohttp built a {type(server).__name__}, not a web.Server: update _CappedRunner")
        server.__class__ = _CappedServer
        capped = cast(_CappedServer, server)
        capped.cap, capped.open_connections, capped.refused = self.cap, 0, 0
        return capped


@dataclass
class HttpServer:
    runner: web.AppRunner
    port: int
    max_connections: int

    @property
    def connections(self) -> int:
        """Connections open now."""
        server = self.runner.server
        return server.open_connections if isinstance(server, _CappedServer) else 0

    @property
    def refused(self) -> int:
        """Connections answered 503 because the cap was reached, since the start."""
        server = self.runner.server
        return server.refused if isinstance(server, _CappedServer) else 0

    async def close(self) -> None:
        await self.runner.cleanup()


def _listen_error(exc: OSError, config: LoadedConfig) -> ConfigError:
    """What to change when the address cannot be listened on, naming where the value came from."""
    api = config.settings.platforms.api_server
    names = ApiServerSettings.env_names()

    def where(key: str) -> str:
        var = names[key]
        if config.env.get(var):
            return f"{var} (set in the environment or .env; it overrides {config.config_file})"
        return f"platforms.api_server.{key} in {config.config_file}"

    address = f"{api.host}:{api.port}"
    if exc.errno == errno.EADDRINUSE:
        return ConfigError(f"cannot listen on {address}: the port is already in use by another program "
                           f"(another hermes-gateway?). Change {where('port')}, or stop that program.")
    if exc.errno == errno.EADDRNOTAVAIL:
        return ConfigError(f"cannot listen on {address}: {api.host} is not an address of this machine. "
                           f"Change {where('host')}.")
    if exc.errno == errno.EACCES:
        return ConfigError(f"cannot listen on {address}: ports below 1024 need privileges. "
                           f"Change {where('port')} to 1024 or above.")
    reason = exc.strerror or str(exc)
    return ConfigError(f"cannot listen on {address} ({reason}). Change {where('host')} or {where('port')}.")


async def start_http_server(config: LoadedConfig, routes: Iterable[Callable[[web.Application], None]]) -> HttpServer:
    """Listen on ``platforms.api_server``'s host and port with its limits; each of ``routes`` adds its
    routes to the app. Raises ConfigError when the address cannot be listened on."""
    api = config.settings.platforms.api_server
    fd_limit = open_file_limit()
    cap = connection_cap(api.max_connections, fd_limit)
    if fd_limit is not None and cap >= fd_limit:
        log.warning("http.cap_above_fd_limit", max_connections=cap, fd_limit=fd_limit,
                    hint="lower platforms.api_server.max_connections or raise the open-file limit (LimitNOFILE)")
    app = web.Application(client_max_size=api.max_request_bytes,
                          handler_args={"keepalive_timeout": api.keepalive_timeout})
    for add in routes:
        add(app)
    runner = _CappedRunner(app, cap=cap, access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_TIMEOUT)
    await runner.setup()
    site = web.TCPSite(runner, api.host, api.port, backlog=api.backlog)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise _listen_error(exc, config) from None
    port = site.port
    log.info("http.listening", host=api.host, port=port, max_connections=cap, fd_limit=fd_limit,
             keepalive_timeout=api.keepalive_timeout, backlog=api.backlog)
    return HttpServer(runner, port, cap)
