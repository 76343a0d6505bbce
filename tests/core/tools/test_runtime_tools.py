"""AgentRuntime.tools_for: the built-in tools plus the live MCP tools, per platform and chat type,
cached until the tool set changes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core import AgentRuntime, AgentSettings
from core.llm import ModelClient, ModelSettings
from core.tools import GroupToolPolicy, Tool, ToolContext, ToolError, ToolsetPolicy, builtin_tools
from core.tools import ToolRegistry as Registry
from core.tools.mcp import McpManager
from storage import StateStore

from .mcp._servers import fake


async def _ok(args: Mapping[str, Any], ctx: ToolContext) -> str:
    return "ok"


def _runtime(store: StateStore, home: Path, mcp: McpManager | None, **settings: Any) -> AgentRuntime:
    tools = [*builtin_tools(), Tool("terminal", "run a command", {"type": "object"}, _ok, toolset="terminal"),
             Tool("write_file", "write a file", {"type": "object"}, _ok, toolset="files", tags=("writes",))]
    return AgentRuntime(store, ModelClient(ModelSettings()), AgentSettings(**settings), home=home,
                        registry=Registry(tools), mcp=mcp)


async def test_mcp_tools_join_per_platform_and_the_views_are_cached(store: StateStore, tmp_path: Path) -> None:
    manager = McpManager([fake("a"), fake("b")], backoff=0.1)
    await manager.start()
    try:
        assert await manager.wait_ready(30)
        rt = _runtime(store, tmp_path, manager, toolsets={
            "telegram": ToolsetPolicy(disabled=frozenset({"mcp:b"})),
            "slack": ToolsetPolicy(enabled=frozenset({"memory"})),
        })
        everywhere = rt.tools_for("api-server")
        assert {"mcp_a_echo", "mcp_b_echo", "memory", "terminal"} <= set(everywhere.names)
        assert rt.tools_for("api-server") is everywhere  # cached: nothing changed
        telegram = rt.tools_for("telegram")
        assert "mcp_a_echo" in telegram and "mcp_b_echo" not in telegram
        assert rt.tools_for("slack").names == ["memory"]
        ctx = rt.tool_context("s1", "telegram")
        assert (await telegram.dispatch("mcp_a_echo", {"text": "via runtime"}, ctx)).content == "via runtime"

        server = manager.server("b")
        assert server is not None
        try:
            await server.call("crash", {})
        except ToolError:
            pass
        gone = rt.tools_for("api-server")
        assert gone is not everywhere and "mcp_b_echo" not in gone and "mcp_a_echo" in gone
        for _ in range(400):
            if server.state == "ready":
                break
            await asyncio.sleep(0.05)
        assert "mcp_b_echo" in rt.tools_for("api-server")
        overview = rt.tool_overview("telegram", "dm")
        rows = {t.name: t for t in overview.tools}
        assert rows["mcp_b_echo"].off == "toolset" and rows["mcp_a_echo"].off is None
        assert {s.name: s.state for s in overview.servers} == {"a": "ready", "b": "ready"}
    finally:
        await manager.aclose()


async def test_groups_lose_the_terminal_and_writes_unless_allowed(store: StateStore, tmp_path: Path) -> None:
    rt = _runtime(store, tmp_path, None)
    assert {"terminal", "write_file"} <= set(rt.tools_for("telegram", "dm").names)
    group = rt.tools_for("telegram", "group")
    assert "terminal" not in group and "write_file" not in group and "memory" in group
    assert rt.tool_context("s1", "telegram", chat_type="group").chat_type == "group"
    rt = _runtime(store, tmp_path, None, groups=GroupToolPolicy(terminal=True, file_writes=True))
    assert {"terminal", "write_file"} <= set(rt.tools_for("discord", "channel").names)
