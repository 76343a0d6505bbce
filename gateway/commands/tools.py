"""/tools: what the agent of this chat can use, grouped by toolset, and why anything is not.

The same report answers the control socket's ``tools`` request (``hermes-gateway tools``), so a
chat and the command line describe tools alike; the command line renders it with ``render_tools``
too, from config alone when the daemon is stopped.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from core.tools import ToolOverview
from core.tools.mcp import McpServerStatus
from gateway.logs import redact
from gateway.routing.commands import Command, CommandContext, CommandRegistry
from gateway.routing.services import Services

__all__ = ["register_tools_commands", "render_tools", "tools_report"]

_STATE_TEXT = {
    "ready": "ready",
    "starting": "starting",
    "failed": "failed to start, retrying",
    "restarting": "restarting",
    "disabled": "disabled (enabled: false)",
    "stopped": "not running (daemon stopped)",
}


def tools_report(services: Services, platform: str, chat_type: str | None) -> ToolOverview | None:
    """The overview for a chat of ``platform`` (None when the daemon runs an agent without tools).
    Errors are passed through the log redactor: a server may have printed a secret."""
    if services.tools is None:
        return None
    overview = services.tools.tool_overview(services, platform, chat_type)
    servers = tuple(replace(s, last_error=redact(s.last_error)) if s.last_error else s for s in overview.servers)
    tools = tuple(replace(t, reason=redact(t.reason)) if t.reason else t for t in overview.tools)
    return replace(overview, tools=tools, servers=servers)


def _server_line(server: McpServerStatus, overview: ToolOverview) -> str:
    state = _STATE_TEXT.get(server.state, server.state)
    details = [f"{len(server.tools)} tools"] if server.state == "ready" else []
    if server.restarts:
        details.append(f"{server.restarts} restarts")
    if server.last_error and server.state != "ready":
        details.append(f"last error: {server.last_error}")
    extra = f" ({'; '.join(details)})" if details else ""
    if server.name in overview.blocked_servers:
        extra += f" — its toolset is disabled on {overview.platform} (agent.toolsets)"
    return f"• {server.name} [{server.transport}]: {state}{extra}"


def render_tools(overview: ToolOverview) -> str:
    where = overview.platform + (f", {overview.chat_type}" if overview.chat_type else "")
    offered: dict[str, list[str]] = defaultdict(list)
    off: dict[tuple[str, str], list[str]] = defaultdict(list)
    for tool in overview.tools:
        if tool.off is None:
            offered[tool.toolset].append(tool.name)
        else:
            off[(tool.toolset, tool.reason or tool.off)].append(tool.name)
    lines = [f"🧰 Tools for {where}:"]
    if not offered:
        lines.append("(none)")
    for toolset in sorted(offered):
        lines.append(f"{toolset}: {', '.join(offered[toolset])}")
    if off:
        lines.append("")
        lines.append("Not available here:")
        for (toolset, reason), names in sorted(off.items()):
            lines.append(f"• {', '.join(names)} ({toolset}): {reason}")
    if overview.servers:
        lines.append("")
        lines.append("MCP servers:")
        lines.extend(_server_line(server, overview) for server in overview.servers)
    return "\n".join(lines)



async def _tools(ctx: CommandContext) -> str:
    msg = ctx.message
    overview = tools_report(ctx.services, msg.platform, msg.chat_type)
    if overview is None:
        return "This gateway's agent does not say which tools it has."
    return render_tools(overview)


def register_tools_commands(registry: CommandRegistry) -> None:
    registry.register(Command("tools", "list the tools the agent can use here, and why others are not",
                              _tools, immediate=True))


