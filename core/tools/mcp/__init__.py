"""MCP servers through the official ``mcp`` SDK: each a long-lived client owned by the daemon,
its tools offered to every agent as ``mcp_<server>_<tool>`` (toolset ``mcp:<server>``).

- ``_spec``: ``McpServerSpec`` (what to start), ``McpServerStatus``, the tools' names
- ``_server``: ``McpServer``, one server's owner task, its calls and restarts
- ``_manager``: ``McpManager``, all of them for the daemon
- ``_content``: results as text, schemas we can validate; ``_stderr``: a child's stderr
"""

from ._content import EMPTY_SCHEMA, result_text, usable_schema
from ._manager import McpManager
from ._server import McpServer
from ._spec import MAX_TOOL_NAME, McpServerSpec, McpServerStatus, McpState, tool_name, unique_names

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
