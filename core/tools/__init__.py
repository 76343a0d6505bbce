"""Tools the agent may call: the types, the registry and the built-in set."""

from __future__ import annotations

import importlib

import structlog

from ._base import CronPort, FileOutbox, Tool, ToolContext, ToolError, ToolHandler
from ._overview import ToolOverview, ToolStatus, server_reason, tool_overview, unavailable_tool
from ._registry import GROUP_CHAT_TYPES, GroupToolPolicy, ToolOutcome, ToolRegistry, ToolsetPolicy
from .approval import ApprovalDecision, ApprovalRequest, Approver, require_approval

log = structlog.get_logger("hermes.tools")

# module -> attribute: a Tool, or a list of Tools
_BUILTIN_SOURCES = (
    ("core.tools.memory_tool", "MEMORY_TOOL"),
    ("core.tools.session_search", "SESSION_SEARCH_TOOL"),
    ("core.tools.skills_tools", "SKILL_TOOLS"),
    ("core.tools.send_file", "SEND_FILE_TOOL"),
    ("core.tools.cronjob", "CRONJOB_TOOL"),
)


def builtin_tools() -> list[Tool]:
    """memory, session_search, skills_categories, skills_list, skill_view, skill_manage, send_file, cronjob."""
    tools: list[Tool] = []
    for module_name, attribute in _BUILTIN_SOURCES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            # Only while a module is still being written; the agent runs without those tools.
            log.warning("tools.builtin_missing", module=module_name)
            continue
        value = getattr(module, attribute)
        tools.extend(value if isinstance(value, list | tuple) else [value])
    return tools


def builtin_registry() -> ToolRegistry:
    return ToolRegistry(builtin_tools())


__all__ = [
    "GROUP_CHAT_TYPES",
    "ApprovalDecision",
    "ApprovalRequest",
    "Approver",
    "CronPort",
    "FileOutbox",
    "GroupToolPolicy",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolHandler",
    "ToolOutcome",
    "ToolOverview",
    "ToolRegistry",
    "ToolStatus",
    "ToolsetPolicy",
    "builtin_registry",
    "builtin_tools",
    "require_approval",
    "server_reason",
    "tool_overview",
    "unavailable_tool",
]
