"""A real stdio MCP server for the suite, written with the official SDK (``MCPServer``).

Tools: ``echo(text)``, ``noop()``, ``slow(seconds)``, ``freeze(seconds)`` (the
whole server hangs), ``crash()`` (the process dies mid-call),
``fail(text)`` (an ``isError`` result), ``env(name)`` (a variable of its environment).

``--crash-at-start`` exits before speaking MCP; ``--crash-once FILE`` exits at start only while
FILE does not exist yet (and creates it), so the first start fails and a restart succeeds;
``--say-env NAME`` prints that variable to stderr at start; ``--http PORT`` serves streamable HTTP
on 127.0.0.1:PORT/mcp instead of stdio (``header(name)`` then returns a request header).
Run as ``python tests/fakes/mcp_server.py [flags]``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("hermes-test")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def noop() -> str:
    """Do nothing (for measuring the call overhead)."""
    return ""


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def freeze(seconds: float) -> str:
    """Block the whole server (its event loop), so nothing, not even a ping, is answered."""
    time.sleep(seconds)
    return "thawed"


@server.tool()
def crash() -> str:
    """Die in the middle of the call, saying so on stderr."""
    print("fatal: out of coffee", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def fail(text: str) -> str:
    """Refuse: the client sees an isError result with ``text``."""
    raise ToolError(text)


@server.tool()
def env(name: str) -> str:
    """One variable of this process's environment ('(unset)' when it is not set)."""
    return os.environ.get(name, "(unset)")


@server.tool()
def header(name: str, ctx: Context) -> str:
    """One header of the HTTP request that carried this call ('(none)' over stdio or when absent)."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    return str(headers.get(name, "(none)")) if headers is not None else "(none)"


def main(argv: list[str]) -> None:
    if "--crash-at-start" in argv:
        print("cannot start: no database", file=sys.stderr)
        raise SystemExit(2)
    if "--say-env" in argv:  # a chatty server: its own credential on stderr
        name = argv[argv.index("--say-env") + 1]
        print(f"starting with {name}={os.environ.get(name)}", file=sys.stderr, flush=True)
    if "--crash-once" in argv:
        marker = Path(argv[argv.index("--crash-once") + 1])
        if not marker.exists():
            marker.write_text("started once")
            raise SystemExit(2)
    if "--http" in argv:  # streamable HTTP on 127.0.0.1:<port>, path /mcp
        server.run("streamable-http", host="127.0.0.1", port=int(argv[argv.index("--http") + 1]))
        return
    server.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
