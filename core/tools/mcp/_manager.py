"""``McpManager``: the daemon's MCP servers, started once and shared by every per-message agent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING

import structlog

from .._base import Tool
from ._spec import PING_INTERVAL, PING_TIMEOUT, McpServerSpec, McpServerStatus

if TYPE_CHECKING:
    from ._server import McpServer

log = structlog.get_logger("hermes.mcp")


class McpManager:
    """Every configured server, each in a task of its own.

    ``start`` returns at once: a server that is slow or fails to start never holds up the daemon,
    it is retried in the background (1, 2, 4 ... 60 s apart) and its tools appear when it is ready.
    ``tools()`` is what is on offer right now; ``revision`` changes whenever that changes, so a
    caller may cache whatever it builds from the tools.
    """

    def __init__(self, specs: Iterable[McpServerSpec], *, backoff: float = 1.0, backoff_max: float = 60.0,
                 ping_interval: float = PING_INTERVAL, ping_timeout: float = PING_TIMEOUT) -> None:
        self._servers: dict[str, McpServer] = {}
        specs = list(specs)
        if specs:
            # The SDK (with pydantic models and starlette: ~20 MB) loads only for a daemon that has servers.
            from ._server import McpServer
        for spec in specs:
            if spec.name in self._servers:
                raise ValueError(f"two MCP servers are named {spec.name!r}")
            self._servers[spec.name] = McpServer(spec, backoff=backoff, backoff_max=backoff_max,
                                                 ping_interval=ping_interval, ping_timeout=ping_timeout)
        self._started = False

    @property
    def specs(self) -> list[McpServerSpec]:
        return [s.spec for s in self._servers.values()]

    async def start(self) -> None:
        """Start every enabled server in the background; never raises."""
        if self._started:
            return
        self._started = True
        for server in self._servers.values():
            try:
                server.start()
            except Exception:  # nothing of one server may stop the daemon
                log.exception("mcp.start_crashed", server=server.spec.name)
        log.info("mcp.starting", servers=sorted(s.spec.name for s in self._servers.values() if s.spec.enabled))

    async def aclose(self) -> None:
        """Stop every server; stdio children are terminated, then killed, with their process groups."""
        await asyncio.gather(*(s.aclose() for s in self._servers.values()), return_exceptions=True)
        self._started = False

    async def wait_ready(self, within: float) -> bool:
        """Until every enabled server is ready (tests, the bench); False when ``within`` seconds ran out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while not all(s.state == "ready" for s in self._servers.values() if s.spec.enabled):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    @property
    def revision(self) -> tuple[int, ...]:
        return tuple(s.revision for s in self._servers.values())

    def tools(self) -> list[Tool]:
        """The tools of the servers that are ready now, ``mcp_<server>_<tool>``, toolset ``mcp:<server>``."""
        return [tool for server in self._servers.values() for tool in server.tools()]

    def status(self) -> list[McpServerStatus]:
        return [server.status() for server in self._servers.values()]

    def server(self, name: str) -> McpServer | None:
        return self._servers.get(name)
