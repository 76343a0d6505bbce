"""``hermes-gateway tools``: the tools an agent would have, and why any is not available.

Asks the running daemon over its control socket (the live list: MCP servers with their states
and last errors). Without a daemon it prints what config.yaml gives, the MCP servers marked
"not running (daemon stopped)". Exit codes: 0 for a list either way, 78 for a configuration
error, 1 when the daemon answered with an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from gateway.cli.common import quiet_logs
from gateway.config import default_home, load_config, mcp_specs
from gateway.control import client as control_client
from gateway.errors import EX_CONFIG, ConfigError, DaemonNotRunningError
from storage.errors import GatewayError

__all__ = ["tools"]

EX_USER = 1
HomeOption = Annotated[Path | None, typer.Option(
    "--home", metavar="DIR", help="HERMES_HOME (default: $HERMES_HOME or ~/.hermes)")]


def _fail(message: str, code: int) -> None:
    typer.echo(f"hermes-gateway tools: {' '.join(message.split())}", err=True)
    raise typer.Exit(code)


def _from_config(home: Path, platform: str, chat_type: str) -> dict[str, object]:
    """What config.yaml gives without a daemon: the daemon's tools under the platform's policies,
    the MCP servers named but not running."""
    # Here, not at the top: they load the agent's tools, which no other command needs.
    from core.tools import tool_overview
    from core.tools.mcp import McpServerStatus
    from gateway.daemon.settings import agent_settings
    from gateway.daemon.tools import tool_registry

    config = load_config(home)
    settings = agent_settings(config)
    servers = [McpServerStatus(s.name, "stopped" if s.enabled else "disabled", transport=s.transport)
               for s in mcp_specs(config.settings.mcp_servers, config.env)]
    overview = tool_overview(tool_registry(config), settings.policy(platform), settings.groups, platform, chat_type,
                             servers)
    return overview.as_dict()


def tools(
    home: HomeOption = None,
    platform: Annotated[str, typer.Option("--platform", help="For a chat of this platform "
                                          "(telegram, discord, slack, api-server, cli).")] = "cli",
    group: Annotated[bool, typer.Option("--group", help="For a group chat (some tools are off in groups).")]
    = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON, and nothing else.")] = False,
) -> None:
    """List the tools the agent can use (live from the daemon, or from config when it is stopped)."""
    quiet_logs()
    root = (home or default_home()).expanduser()
    chat_type = "group" if group else "dm"
    running = True
    try:
        result = control_client.call_sync(root, "tools", {"platform": platform, "chat_type": chat_type},
                                          reply_within=30)
        data = result.get("overview")
        if data is None:
            _fail("the daemon runs an agent that does not list its tools", EX_USER)
    except DaemonNotRunningError:
        running = False
        try:
            data = _from_config(root, platform, chat_type)
        except ConfigError as exc:
            _fail(f"configuration error: {exc}", EX_CONFIG)
    except GatewayError as exc:
        _fail(str(exc), EX_USER)
    assert isinstance(data, dict)
    if as_json:
        typer.echo(json.dumps({"running": running, **data}, indent=2, sort_keys=True))
        return
    if not running:
        typer.echo(f"hermes-gateway is not running for {root}; this is what its config gives:")
    from core.tools import ToolOverview  # not at the top: see _from_config
    from gateway.commands import render_tools

    typer.echo(render_tools(ToolOverview.from_dict(data)))
