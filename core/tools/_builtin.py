"""The built-in tools every agent may have, loaded module by module."""

from __future__ import annotations

import importlib

import structlog

from ._base import Tool
from ._registry import ToolRegistry

__all__ = ["builtin_registry", "builtin_tools"]

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
