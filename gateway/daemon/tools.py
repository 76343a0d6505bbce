"""The agent's tools as this daemon run has them: the built-in set plus the tools that act on the
machine (files, and as they are configured terminal and web), each built once from validated config.

MCP servers are not here: they are long-lived clients the daemon starts and stops itself, whose
tools join per turn.
"""

from __future__ import annotations

from core.tools import Tool, ToolRegistry, builtin_tools
from core.tools.files import FilesSettings, file_tools
from gateway.config import LoadedConfig

__all__ = ["files_settings", "tool_registry"]


def files_settings(config: LoadedConfig) -> FilesSettings:
    f = config.settings.tools.files
    return FilesSettings.for_home(config.home, f.roots, max_read_kb=f.max_read_kb)


def tool_registry(config: LoadedConfig) -> ToolRegistry:
    """Every tool of this run, results capped at ``agent.max_tool_result_kb``."""
    tools: list[Tool] = [*builtin_tools(), *file_tools(files_settings(config))]
    return ToolRegistry(tools, max_result_chars=config.settings.agent.max_tool_result_kb * 1024)
