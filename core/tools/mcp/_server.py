"""One MCP server, owned by one long-lived task.

The SDK's transports and ``ClientSession`` are anyio context managers whose cancel scopes must be
entered and left by the same task, so the task ``_run`` enters them, initializes, lists the tools
and then only watches the connection. Tool calls come from the agents' tasks and await
``session.call_tool`` directly: the SDK correlates concurrent requests itself, and a call never
enters or leaves a scope of the connection.

A connection ends when a call finds it closed (the child died), when the server sends a line
that is not JSON-RPC, or when a ping goes unanswered (a hung server). The owner then leaves the
context managers (the SDK closes stdin, then terminates and kills the child's process group)
and starts again after a pause that doubles from 1 s up to 60 s while starting keeps failing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp.types as mt
import structlog
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .._base import Tool, ToolContext, ToolError
from ._content import result_text, usable_schema
from ._spec import PING_INTERVAL, PING_TIMEOUT, McpServerSpec, McpServerStatus, McpState, unique_names
from ._stderr import ChildStderr

log = structlog.get_logger("hermes.mcp")

_ERROR_CHARS = 300
_CLOSED = "the server closed the connection (the process exited?)"


@dataclass
class _Connection:
    session: ClientSession
    #: set when the connection is known to be unusable; the owner then tears it down
    broken: asyncio.Event = field(default_factory=asyncio.Event)
    #: why, when the server itself was at fault ("sent a line that is not JSON-RPC")
    fault: str | None = None
    #: a call timed out: ping now rather than at the next interval
    check: asyncio.Event = field(default_factory=asyncio.Event)
    #: calls under way; the idle ping waits while there are some (a server may run one call at a
    #: time, and a long legitimate call must not look like a hang)
    calls: int = 0


def _root(exc: BaseException) -> BaseException:
    """The first real error inside the task groups' ExceptionGroups the SDK raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _short(exc: BaseException) -> str:
    exc = _root(exc)
    text = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, MCPError) and text != type(exc).__name__:
        text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 1] + "…"


class McpServer:
    """One server's life: start, serve, restart; and its tools as ``Tool`` objects."""

    def __init__(self, spec: McpServerSpec, *, backoff: float = 1.0, backoff_max: float = 60.0,
                 ping_interval: float = PING_INTERVAL, ping_timeout: float = PING_TIMEOUT) -> None:
        self.spec = spec
        self.log = log.bind(server=spec.name)
        self.state: McpState = "starting" if spec.enabled else "disabled"
        self.last_error: str | None = None
        self.restarts = 0
        #: bumped whenever the tools on offer change (a server became ready, or went away)
        self.revision = 0
        self._tools: list[Tool] = []
        self._known: tuple[str, ...] = ()
        self._conn: _Connection | None = None
        self._last_stderr = ""
        self._backoff, self._backoff_max = backoff, backoff_max
        self._ping_interval, self._ping_timeout = ping_interval, ping_timeout
        self._scope = anyio.CancelScope()
        self._task: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- the owner

    def start(self) -> None:
        if self.spec.enabled and self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"mcp:{self.spec.name}")

    async def aclose(self, grace: float = 10.0) -> None:
        self._scope.cancel()
        task, self._task = self._task, None
        if task is not None:
            # The SDK's shutdown is shielded and bounded (stdin closed, 2 s, SIGTERM, 2 s, SIGKILL).
            done, _ = await asyncio.wait({task}, timeout=grace)
            if not done:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self.spec.enabled:
            self.state = "stopped"
        self._set_tools([])

    async def _run(self) -> None:
        delay = self._backoff
        with self._scope:
            while True:
                served = False
                try:
                    served = await self._connect_and_serve()
                except Exception as exc:
                    self.last_error = (f"did not finish starting within {self.spec.start_timeout:g} s"
                                       if isinstance(exc, TimeoutError) else self._lost(exc))
                    self.log.warning("mcp.start_failed", error=self.last_error, retry_in=delay)
                self._set_tools([])
                if served:
                    delay = self._backoff  # it worked for a while: this is a fresh failure
                    self.state = "restarting"
                    if self._last_stderr and (self.last_error or "").startswith(_CLOSED):
                        # Read only now that the child is gone: its last words say why it died.
                        self.last_error = self.spec.scrub(f"{self.last_error}; its last output: {self._last_stderr}")
                    self.log.warning("mcp.connection_lost", error=self.last_error, retry_in=delay)
                else:
                    self.state = "failed"
                self.restarts += 1
                # "failed" stays through the retries: it is what a person needs to see until it works
                await anyio.sleep(delay)
                delay = min(delay * 2, self._backoff_max)

    async def _connect_and_serve(self) -> bool:
        """Start, list the tools, serve until the connection breaks. True when it had been ready."""
        async with self._transport() as (read, write):
            conn: _Connection | None = None

            async def on_message(message: Any) -> None:
                # Exceptions here are what the transport could not parse: a line that is not JSON-RPC.
                if isinstance(message, Exception) and conn is not None:
                    conn.fault = "sent a reply that is not valid JSON-RPC"
                    self.last_error = f"the server {conn.fault}"
                    self._break(conn)

            async with ClientSession(read, write, message_handler=on_message) as session:
                conn = _Connection(session)
                with anyio.fail_after(self.spec.start_timeout):
                    await session.initialize()
                    listed = await self._list_tools(session)
                self._conn = conn
                self._set_tools(self._wrap(listed))
                self.state = "ready"  # last_error stays: why it last went down is worth knowing
                self.log.info("mcp.ready", tools=len(self._tools), transport=self.spec.transport)
                try:
                    await self._watch(conn)
                finally:
                    self._conn = None
        return True

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        spec = self.spec
        if spec.url is not None:
            # The SDK's own defaults: a server may hold its event stream open; a call's own limit is
            # the per-call timeout below, not the socket's.
            timeout = httpx2.Timeout(30.0, read=300.0)
            async with httpx2.AsyncClient(headers=dict(spec.headers), timeout=timeout) as http, \
                    streamable_http_client(spec.url, http_client=http) as streams:
                yield streams
            return
        assert spec.command is not None
        # The child gets the SDK's safe environment (PATH, HOME, ...) plus its own env: never the
        # daemon's secrets.
        params = StdioServerParameters(command=spec.command, args=list(spec.args), env=dict(spec.env),
                                       cwd=spec.cwd)
        stderr = ChildStderr(self.log, spec.scrub)
        self._last_stderr = ""  # this child's, not the one before it
        try:
            await stderr.start()
            async with stdio_client(params, errlog=stderr.writer) as streams:
                stderr.child_started()
                yield streams
        finally:
            await stderr.aclose()
            # What it wrote last says why it died ("no API key", a traceback).
            self._last_stderr = stderr.tail()

    async def _list_tools(self, session: ClientSession) -> list[mt.Tool]:
        tools: list[mt.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server that pages forever is not followed forever
            params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _watch(self, conn: _Connection) -> None:
        while not conn.broken.is_set():
            with anyio.move_on_after(self._ping_interval):
                await _first(conn.broken, conn.check)
            if conn.broken.is_set():
                return
            if not conn.check.is_set() and conn.calls:
                continue
            conn.check.clear()
            try:
                with anyio.fail_after(min(self.spec.timeout, self._ping_timeout)):
                    await conn.session.send_ping()
            except TimeoutError:
                self.last_error = "the server stopped answering (a ping went unanswered)"
                return
            except Exception as exc:
                self.last_error = self._lost(exc)
                return

    def _lost(self, exc: BaseException) -> str:
        tail = self._last_stderr
        why = _CLOSED if _closed(exc) else _short(exc)
        return self.spec.scrub(f"{why}; its last output: {tail}" if tail else why)

    def _break(self, conn: _Connection) -> None:
        """Known dead: off the offer now; the owner tears it down and starts again."""
        if not conn.broken.is_set():
            conn.broken.set()
            self.state = "restarting"
            self.revision += 1

    # ---------------------------------------------------------------- the tools

    def _set_tools(self, tools: list[Tool]) -> None:
        if tools or self._tools:
            self.revision += 1
        self._tools = tools
        if tools:
            self._known = tuple(t.name for t in tools)

    def _wrap(self, listed: list[mt.Tool]) -> list[Tool]:
        names = unique_names(self.spec.name, [t.name for t in listed])
        by_name = {t.name: t for t in listed}
        tools = []
        for name, original in names.items():
            source = by_name[original]
            description = (source.description or source.title or original).strip()
            tools.append(Tool(name=name, description=f"[MCP {self.spec.name}] {description}",
                              parameters=usable_schema(source.input_schema), handler=self._handler(original),
                              toolset=self.spec.toolset))
        return tools

    def _handler(self, original: str) -> Any:
        async def handler(args: Mapping[str, Any], ctx: ToolContext) -> str:
            return await self.call(original, dict(args))

        return handler

    def tools(self) -> list[Tool]:
        return list(self._tools) if self.state == "ready" else []

    def status(self) -> McpServerStatus:
        return McpServerStatus(self.spec.name, self.state, self._known, self.last_error, self.restarts,
                               self.spec.transport)

    async def call(self, tool: str, args: dict[str, Any]) -> str:
        """One tool call; every failure is a ``ToolError`` the model can read."""
        name, conn = self.spec.name, self._conn
        if conn is None or conn.broken.is_set():
            state = "restarting" if conn is not None else self.state
            why = f": {self.last_error}" if self.last_error else ""
            raise ToolError(f"the MCP server {name} is not available right now ({state}{why}). "
                            "Try again in a little while or do without it.")
        timeout = self.spec.timeout
        conn.calls += 1
        try:
            result = await conn.session.call_tool(tool, args, read_timeout_seconds=timeout)
        except (TimeoutError, MCPError) as exc:
            if isinstance(exc, TimeoutError) or exc.error.code == mt.REQUEST_TIMEOUT:
                conn.check.set()  # a hung server is restarted; a slow call is only given up
                raise ToolError(f"the MCP server {name} did not answer within {timeout:g} s "
                                f"(tool {tool}). Try something smaller or another way.") from None
            if not _closed(exc):
                raise ToolError(f"the MCP server {name} refused the call to {tool}: "
                                f"{self.spec.scrub(_short(exc))}") from None
            self._break(conn)
            if conn.fault is not None:
                raise ToolError(f"the MCP server {name} {conn.fault} to {tool}; it is being restarted. "
                                "Try again in a few seconds.") from None
            self.last_error = self._lost(exc)
            raise ToolError(f"the MCP server {name} stopped while running {tool} (it crashed or closed "
                            "the connection); it is being restarted. Try again in a few seconds.") from None
        except Exception as exc:
            # A reply that parses as JSON-RPC but not as a tool result (the SDK validates it).
            self.log.warning("mcp.bad_result", tool=tool, error=type(exc).__name__)
            raise ToolError(f"the MCP server {name} sent a reply to {tool} that is not a valid MCP tool "
                            f"result ({type(exc).__name__}).") from None
        finally:
            conn.calls -= 1
        # The model never sees the server's own credentials, even when the server prints them.
        text = self.spec.scrub(result_text(result))
        if result.is_error:
            raise ToolError(f"{tool} (MCP server {name}) failed: {text or 'no details'}")
        return text


def _closed(exc: BaseException) -> bool:
    exc = _root(exc)
    return isinstance(exc, MCPError) and exc.error.code == mt.CONNECTION_CLOSED


async def _first(*events: asyncio.Event) -> None:
    """Returns when any of ``events`` is set."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
