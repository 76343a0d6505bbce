"""``tools`` and ``mcp_servers`` in config.yaml: what the agent may do to the machine, and who says yes.

README, "Tools and approvals", explains each key for a person; the defaults are the safe ones
(dangerous actions are asked about; terminal and file writes are off in groups and channels).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "FilesToolConfig",
    "GroupToolsConfig",
    "McpServerConfig",
    "TerminalToolConfig",
    "ToolsConfig",
    "WebSearchConfig",
    "WebToolConfig",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TerminalToolConfig(_Section):
    #: where commands run; unset: $HERMES_HOME/workspace
    cwd: str | None = None
    #: a command is killed (its whole process group) after this many seconds; the model may ask for less
    timeout: float = Field(default=120.0, gt=0, le=3600)
    #: variables of the daemon's environment and .env a command may see; every other one from
    #: .env, and every secret, is kept from it
    pass_env: list[str] = Field(default_factory=list)
    #: the model gets at most this much of a command's output (head and tail; within agent.max_tool_result_kb)
    max_output_kb: int = Field(default=32, ge=1, le=4096)


class FilesToolConfig(_Section):
    #: the folders read_file, write_file, patch and search_files work in; empty: the workspace
    roots: list[str] = Field(default_factory=list)
    #: read_file returns at most this much text in one call
    max_read_kb: int = Field(default=256, ge=1, le=16384)


class WebSearchConfig(_Section):
    provider: Literal["searxng"] = "searxng"
    #: the SearXNG instance (its JSON API must be enabled); unset: web_search is not offered
    url: str | None = None
    max_results: int = Field(default=8, ge=1, le=50)


class WebToolConfig(_Section):
    #: fetch from loopback, private, link-local and metadata addresses too (never on by default)
    allow_private: bool = False
    #: a fetch gives up after this many seconds
    timeout: float = Field(default=20.0, gt=0, le=300)
    #: a response larger than this is cut off (the model is told)
    max_download_mb: float = Field(default=5.0, gt=0, le=200)
    search: WebSearchConfig = Field(default_factory=WebSearchConfig)


class GroupToolsConfig(_Section):
    """What the agent may do in groups and channels (stricter than in a DM by default)."""

    terminal: bool = False
    file_writes: bool = False


class ToolsConfig(_Section):
    #: ask: dangerous actions wait for a yes in the chat; deny: they are refused; off: they run
    #: unasked (doctor warns loudly)
    approvals: Literal["ask", "deny", "off"] = "ask"
    #: no answer within this many seconds is a no
    approval_timeout: float = Field(default=300.0, gt=0, le=86_400)
    #: user ids ("123", or "telegram:123") who may answer any approval, besides the person who asked
    approvers: list[str] = Field(default_factory=list)
    terminal: TerminalToolConfig = Field(default_factory=TerminalToolConfig)
    files: FilesToolConfig = Field(default_factory=FilesToolConfig)
    web: WebToolConfig = Field(default_factory=WebToolConfig)
    groups: GroupToolsConfig = Field(default_factory=GroupToolsConfig)

    @field_validator("approvals", mode="before")
    @classmethod
    def _bare_off(cls, value: object) -> object:
        # YAML 1.1 reads a bare ``off`` (and ``no``) as false: "approvals: off" means the word.
        return "off" if value is False else value


class McpServerConfig(_Section):
    """``mcp_servers.<name>``: a stdio server (``command``) or a streamable HTTP one (``url``).

    Values in ``env`` and ``headers`` may name a variable of .env or the environment as
    ``${NAME}``; they are secrets and never logged.
    """

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    #: one tool call gives up after this many seconds
    timeout: float = Field(default=60.0, gt=0, le=3600)
    enabled: bool = True

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set either command (a stdio server) or url (a streamable HTTP server)")
        return self
