"""What one MCP server is (``McpServerSpec``), how it is doing (``McpServerStatus``), and the names
its tools get in the model's ``tools`` array."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

#: an idle connection is pinged this often, so a dead or hung server is noticed before a call needs it
PING_INTERVAL = 15.0
#: a ping unanswered for this long (or the call timeout, when shorter) means a hung server
PING_TIMEOUT = 10.0

McpState = Literal["starting", "ready", "failed", "restarting", "disabled", "stopped"]

#: the OpenAI ``tools`` array allows these characters in a function name, at most 64 of them
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")
MAX_TOOL_NAME = 64


@dataclass(frozen=True)
class McpServerSpec:
    """One server: a stdio child (``command``) or a streamable HTTP endpoint (``url``).

    ``env`` and ``headers`` hold the values already resolved (``${NAME}`` replaced); they are
    secrets and never appear in a log line, a status or an error.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: one tool call gives up after this many seconds
    timeout: float = 60.0
    #: starting (spawn, initialize, list the tools) gives up after this many seconds
    start_timeout: float = 30.0
    enabled: bool = True

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: set either command or url")

    @property
    def toolset(self) -> str:
        return f"mcp:{self.name}"

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def secrets(self) -> list[str]:
        """The values that must never be shown: every env and header value, and the credential
        of a ``Bearer <token>``-like value on its own (it may be printed without its scheme)."""
        values = [v for v in (*self.env.values(), *self.headers.values()) if v.strip()]
        words = [v.split()[-1] for v in values if len(v.split()) > 1 and len(v.split()[-1]) >= 6]
        return values + words

    def scrub(self, text: str) -> str:
        """``text`` with this server's secret values replaced (a child may print its own token)."""
        for secret in sorted(self.secrets(), key=len, reverse=True):
            if len(secret) >= 3:
                text = text.replace(secret, "[redacted]")
        return text


@dataclass(frozen=True)
class McpServerStatus:
    name: str
    state: McpState
    #: the model-facing names of its tools (the last ones listed, while it restarts)
    tools: tuple[str, ...] = ()
    #: what went wrong last (secrets scrubbed), None when nothing did
    last_error: str | None = None
    restarts: int = 0
    transport: str = "stdio"

    @property
    def toolset(self) -> str:
        return f"mcp:{self.name}"


def tool_name(server: str, tool: str) -> str:
    """``mcp_<server>_<tool>``, limited to [A-Za-z0-9_-] and 64 characters."""
    return _NOT_ALLOWED.sub("_", f"mcp_{server}_{tool}")[:MAX_TOOL_NAME]


def unique_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """Model-facing name -> the server's own tool name; two tools that sanitise alike get
    ``_2``, ``_3`` ... (cut so the name still fits)."""
    names: dict[str, str] = {}
    for original in tools:
        name = base = tool_name(server, original)
        n = 1
        while name in names:
            n += 1
            suffix = f"_{n}"
            name = base[: MAX_TOOL_NAME - len(suffix)] + suffix
        names[name] = original
    return names
