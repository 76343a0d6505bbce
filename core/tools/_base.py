"""What a tool is, and what it is given when it runs.

A tool is data plus one async handler. The registry (``_registry``) owns
validation, truncation and turning exceptions into tool results; a handler
just does its job and raises ``ToolError`` with a message the model can act on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from storage.errors import GatewayError

if TYPE_CHECKING:
    from storage import Store

    from .approval import Approver


class ToolError(GatewayError):
    """A tool refused or failed; the message goes back to the model as the tool result."""


@dataclass(frozen=True)
class ToolContext:
    """Everything a tool may touch for one call. Built fresh for every turn."""

    session_id: str
    platform: str
    #: $HERMES_HOME: memories/ and skills/ live under it
    home: Path
    store: Store
    user_id: str | None = None
    #: the key of the chat the turn came from
    session_key: str | None = None
    #: session_search may read every session in state.db (``session_search.scope: all``, or an
    #: owner); otherwise only the sessions this chat may /resume, so that one person's agent
    #: never quotes another person's conversations
    recall_all: bool = False
    #: the toolsets of this chat's tools; a skill requiring another is hidden (None: not checked)
    toolsets: frozenset[str] | None = None
    #: names of the environment variables set for the daemon, .env included; a skill requiring
    #: another is hidden (None: the process environment)
    env_names: frozenset[str] | None = None
    #: the files of this turn's answer (None: this turn cannot send files)
    files: FileOutbox | None = None
    #: the folders ``send_file`` may read from (the workspace, the media store)
    file_roots: tuple[Path, ...] = ()
    #: asks the person of this turn before a dangerous action (None: nobody can be asked, so
    #: such actions are refused)
    approver: Approver | None = None
    #: "dm", "group", "channel" or "thread": where the turn came from
    chat_type: str | None = None
    #: the scheduled jobs of this turn's chat (None: scheduled jobs are not available here)
    cron: CronPort | None = None


class FileOutbox(Protocol):
    """Where ``send_file`` puts the files of this turn's answer (the gateway stores and sends them)."""

    async def add_path(self, path: Path, name: str) -> str:
        """Take the file at ``path`` (already confined to the roots); a line saying what will be sent.
        Raises ``ToolError`` when it cannot be sent (too large, too many)."""

    async def add_bytes(self, data: bytes, name: str) -> str:
        """The same for bytes the agent made."""


class CronPort(Protocol):
    """The scheduled jobs of one turn's chat, as the gateway offers them to the ``cronjob`` tool.

    The gateway builds one per turn, so the owner of a job made here is the turn's chat and
    the jobs listed are the ones this chat may see; core never learns how jobs are stored.
    """

    async def call(self, action: str, args: Mapping[str, Any]) -> str:
        """Do ``action`` (create, list, update, pause, resume, remove, run) with the tool's
        arguments; the text for the model. Raises ``ToolError`` with the reason on a refusal."""


ToolHandler = Callable[[Mapping[str, Any], ToolContext], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    """One callable tool, described the way the OpenAI ``tools`` array wants it."""

    name: str
    description: str
    #: a JSON-schema object for the arguments; validated before ``handler`` runs
    parameters: Mapping[str, Any]
    handler: ToolHandler
    #: the toolset it belongs to (enabled or disabled per platform in config)
    toolset: str = "core"
    #: longest result handed back to the model, in characters
    max_result_chars: int = 20_000
    tags: tuple[str, ...] = field(default_factory=tuple)
    #: why the tool is listed (``/tools``) but not offered, e.g. web_search without a search URL
    #: ("no search URL (tools.web.search.url)"); None: offered
    unavailable: str | None = None

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }
