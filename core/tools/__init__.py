"""Tools the agent may call: the types, the registry and the built-in set.

Its names load on first use (PEP 562, ``storage.lazy``): the error tree needs ``ToolError`` only, not
the registry's JSON Schema validator and every tool's module.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

if TYPE_CHECKING:
    from ._base import CronPort, FileOutbox, Tool, ToolContext, ToolError, ToolHandler
    from ._builtin import builtin_registry, builtin_tools
    from ._overview import ToolOverview, ToolStatus, server_reason, tool_overview, unavailable_tool
    from ._registry import GROUP_CHAT_TYPES, GroupToolPolicy, ToolOutcome, ToolRegistry, ToolsetPolicy
    from .approval import ApprovalDecision, ApprovalRequest, Approver, require_approval

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

_WHERE = {
    "ApprovalDecision": "core.tools.approval",
    "ApprovalRequest": "core.tools.approval",
    "Approver": "core.tools.approval",
    "CronPort": "core.tools._base",
    "FileOutbox": "core.tools._base",
    "GROUP_CHAT_TYPES": "core.tools._registry",
    "GroupToolPolicy": "core.tools._registry",
    "Tool": "core.tools._base",
    "ToolContext": "core.tools._base",
    "ToolError": "core.tools._base",
    "ToolHandler": "core.tools._base",
    "ToolOutcome": "core.tools._registry",
    "ToolOverview": "core.tools._overview",
    "ToolRegistry": "core.tools._registry",
    "ToolStatus": "core.tools._overview",
    "ToolsetPolicy": "core.tools._registry",
    "builtin_registry": "core.tools._builtin",
    "builtin_tools": "core.tools._builtin",
    "require_approval": "core.tools.approval",
    "server_reason": "core.tools._overview",
    "tool_overview": "core.tools._overview",
    "unavailable_tool": "core.tools._overview",
}

__getattr__ = lazy_names(__name__, _WHERE)
