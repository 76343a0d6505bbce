"""What ``/tools`` and ``hermes-gateway tools`` show: every tool of a chat, on offer or not, and why.

Pure: built from a registry, the platform's policies and the MCP servers' statuses, so the daemon
(live) and the command line (from config, daemon stopped) describe tools the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ._base import Tool, ToolContext, ToolError
from ._registry import GroupToolPolicy, ToolRegistry, ToolsetPolicy
from .mcp import McpServerStatus

_MCP_STATES = {
    "starting": "is starting",
    "failed": "failed to start (retrying)",
    "restarting": "is restarting",
    "disabled": "is disabled (enabled: false)",
    "stopped": "is not running (daemon stopped)",
}


@dataclass(frozen=True)
class ToolStatus:
    name: str
    toolset: str
    description: str
    #: None: on offer in this chat. Otherwise what keeps it off: "toolset" (agent.toolsets),
    #: "group" (tools.groups), "unavailable" (the tool's own reason), "server" (MCP server not ready)
    off: str | None = None
    #: for a person, when ``off`` is set
    reason: str | None = None


@dataclass(frozen=True)
class ToolOverview:
    platform: str
    chat_type: str | None
    tools: tuple[ToolStatus, ...]
    servers: tuple[McpServerStatus, ...] = ()
    #: the MCP servers whose toolset this platform's policy disables (agent.toolsets)
    blocked_servers: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON for the control socket."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolOverview:
        return cls(str(data.get("platform", "")), data.get("chat_type"),
                   tuple(ToolStatus(**t) for t in data.get("tools") or ()),
                   tuple(McpServerStatus(**{**s, "tools": tuple(s.get("tools") or ())})
                         for s in data.get("servers") or ()),
                   tuple(data.get("blocked_servers") or ()))


def unavailable_tool(name: str, toolset: str, reason: str, description: str = "") -> Tool:
    """A tool that is listed (``/tools`` says ``reason``) but never offered: ``web_search`` without
    a search service. The registry's views leave it out; its handler only says why."""

    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> str:
        raise ToolError(f"{name} is not available: {reason}")

    return Tool(name, description or f"{name} (not available)", {"type": "object", "properties": {}}, handler,
                toolset=toolset, unavailable=reason)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 100 else line[:99] + "…"


def server_reason(server: McpServerStatus) -> str:
    what = _MCP_STATES.get(server.state, f"is {server.state}")
    error = f": {server.last_error}" if server.last_error and server.state in ("failed", "restarting") else ""
    return f"MCP server {server.name} {what}{error}"


def tool_overview(registry: ToolRegistry, policy: ToolsetPolicy, groups: GroupToolPolicy, platform: str,
                  chat_type: str | None, servers: Iterable[McpServerStatus] = ()) -> ToolOverview:
    """Every tool of ``registry`` for this chat, plus the known tools of MCP servers that are not ready."""
    rows: list[ToolStatus] = []
    for tool in registry.tools():
        off, reason = None, None
        if not policy.allows(tool.toolset):
            off, reason = "toolset", f"the toolset {tool.toolset} is disabled on {platform} (agent.toolsets)"
        elif (which := groups.blocks(tool, chat_type)) is not None:
            off, reason = "group", f"off in groups and channels (tools.groups.{which})"
        elif tool.unavailable is not None:
            off, reason = "unavailable", tool.unavailable
        rows.append(ToolStatus(tool.name, tool.toolset, _first_line(tool.description), off, reason))
    listed = {row.name for row in rows}
    statuses = tuple(servers)
    for server in statuses:
        if server.state == "ready":
            continue
        for name in server.tools:
            if name not in listed:
                rows.append(ToolStatus(name, server.toolset, "", "server", server_reason(server)))
    blocked = tuple(s.name for s in statuses if not policy.allows(s.toolset))
    return ToolOverview(platform, chat_type, tuple(rows), statuses, blocked)
