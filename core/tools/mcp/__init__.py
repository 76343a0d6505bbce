"""MCP servers through the official ``mcp`` SDK: each a long-lived client owned by the daemon,
its tools offered to every agent as ``mcp_<server>_<tool>`` (toolset ``mcp:<server>``).

- ``_spec``: ``McpServerSpec`` (what to start), ``McpServerStatus``, the tools' names
- ``_server``: ``McpServer``, one server's owner task, its calls and restarts
- ``_manager``: ``McpManager``, all of them for the daemon
- ``_content``: results as text, schemas we can validate; ``_stderr``: a child's stderr
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._manager import McpManager
from ._spec import MAX_TOOL_NAME, McpServerSpec, McpServerStatus, McpState, tool_name, unique_names

if TYPE_CHECKING:
    from ._content import EMPTY_SCHEMA, result_text, usable_schema
    from ._server import McpServer

#: what needs the SDK, loaded on first use: a daemon without MCP servers never imports it
_LAZY = {"EMPTY_SCHEMA": "._content", "result_text": "._content", "usable_schema": "._content",
         "McpServer": "._server"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "EMPTY_SCHEMA",
    "MAX_TOOL_NAME",
    "McpManager",
    "McpServer",
    "McpServerSpec",
    "McpServerStatus",
    "McpState",
    "result_text",
    "tool_name",
    "unique_names",
    "usable_schema",
]
