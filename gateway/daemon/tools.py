"""The agent's tools as this daemon run has them: the built-in set plus the tools that act on the
machine (files, and as they are configured terminal and web), each built once from validated config.

MCP servers are not here: they are long-lived clients the daemon starts and stops itself, whose
tools join per turn.
"""

from __future__ import annotations

from dataclasses import replace

from core.tools import Tool, ToolRegistry, builtin_tools, unavailable_tool
from core.tools.files import FilesSettings, file_tools
from core.tools.terminal import TerminalSettings, terminal_settings, terminal_tool
from core.tools.web import HEADER_ROOM, WebSettings, web_search_unavailable_reason, web_tools
from gateway.config import LoadedConfig

__all__ = ["files_settings", "terminal_config", "tool_registry", "web_settings"]

#: what a result's head-and-tail note and exit line take beyond the output itself
_RESULT_FRAME_KB = 2


def files_settings(config: LoadedConfig) -> FilesSettings:
    f = config.settings.tools.files
    return FilesSettings.for_home(config.home, f.roots, max_read_kb=f.max_read_kb)


def terminal_config(config: LoadedConfig) -> TerminalSettings:
    t = config.settings.tools.terminal
    # The command's head and tail must survive the registry's cap, or its tail (the error) is cut again.
    output_kb = max(1, min(t.max_output_kb, config.settings.agent.max_tool_result_kb - _RESULT_FRAME_KB))
    return terminal_settings(config.home, cwd=t.cwd, timeout=t.timeout, pass_env=t.pass_env,
                             max_output_kb=output_kb, dotenv=config.dotenv)


def web_settings(config: LoadedConfig) -> WebSettings:
    w = config.settings.tools.web
    return WebSettings(allow_private=w.allow_private, timeout=w.timeout,
                       max_download_bytes=int(w.max_download_mb * 2**20), search_url=w.search.url,
                       search_provider=w.search.provider, search_max_results=w.search.max_results,
                       # a page's own "ask for more" note must survive the registry's cap
                       max_chars=max(1024, config.settings.agent.max_tool_result_kb * 1024 - HEADER_ROOM))


def tool_registry(config: LoadedConfig) -> ToolRegistry:
    """Every tool of this run, results capped at ``agent.max_tool_result_kb``."""
    web = web_settings(config)
    builtin = builtin_tools()
    if not config.settings.cron.enabled:  # listed by /tools with the reason, never offered
        builtin = [replace(t, unavailable="scheduled jobs are off (cron.enabled)") if t.toolset == "cron" else t
                   for t in builtin]
    tools: list[Tool] = [*builtin, *file_tools(files_settings(config)), terminal_tool(terminal_config(config)),
                         *web_tools(web)]
    if (reason := web_search_unavailable_reason(web)) is not None:
        tools.append(unavailable_tool("web_search", "web", reason, "Search the web (SearXNG)"))  # for /tools only
    return ToolRegistry(tools, max_result_chars=config.settings.agent.max_tool_result_kb * 1024)
