"""A streamable HTTP MCP server: the suite's SDK server in a child process on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from core.tools import ToolError
from core.tools.mcp import McpManager, McpServerSpec

from ._servers import SERVER

SECRET = "Bearer http-secret-9a8b7c6d"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, SERVER, "--http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                assert proc.poll() is None, "the HTTP MCP server exited"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_tools_and_calls_over_streamable_http_with_headers(http_server: str) -> None:
    manager = McpManager([McpServerSpec("web", url=http_server, headers={"Authorization": SECRET}, timeout=0.5)],
                         backoff=0.1)
    await manager.start()
    try:
        assert await manager.wait_ready(30), manager.status()
        [status] = manager.status()
        assert status.transport == "http" and "mcp_web_echo" in status.tools
        server = manager.server("web")
        assert server is not None
        assert await server.call("echo", {"text": "over http"}) == "over http"
        # The header reaches the server; the model never sees its value.
        assert await server.call("header", {"name": "authorization"}) == "[redacted]"
        with pytest.raises(ToolError, match=r"did not answer within 0\.5 s"):
            await server.call("slow", {"seconds": 10})
        assert await asyncio.wait_for(server.call("echo", {"text": "again"}), 10) == "again"
    finally:
        await manager.aclose()


async def test_an_unreachable_http_server_is_failed_and_retried() -> None:
    manager = McpManager([McpServerSpec("gone", url=f"http://127.0.0.1:{_free_port()}/mcp")], backoff=0.1)
    await manager.start()
    try:
        for _ in range(200):
            if manager.status()[0].restarts >= 2:
                break
            await asyncio.sleep(0.05)
        [status] = manager.status()
        assert status.state == "failed" and status.restarts >= 2
        assert "ConnectError" in (status.last_error or "")
    finally:
        await manager.aclose()
