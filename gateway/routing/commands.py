"""The slash-command registry. A command: a name, a help line, an async handler.

Commands behave the same on every platform; the router hands them a
``CommandContext`` after authorization (no command path bypasses it).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from adapters.base import InboundMessage
from gateway.routing.services import Handoffs, Services

if TYPE_CHECKING:
    from gateway.routing.turns import Turns

_COMMAND = re.compile(r"^/(?P<name>[A-Za-z][\w-]*)(?:@(?P<bot>[\w.]+))?(?:\s+(?P<args>.*))?$", re.DOTALL)


@dataclass(frozen=True)
class ParsedCommand:
    name: str
    args: str


def parse_command(text: str) -> ParsedCommand | None:
    """``/title  My  Name`` -> ("title", "My  Name"); ``/help@mybot`` -> ("help", "")."""
    m = _COMMAND.match(text.strip())
    if m is None:
        return None
    return ParsedCommand(m.group("name").lower().replace("-", "_"), (m.group("args") or "").strip())


@dataclass(frozen=True)
class CommandContext:
    message: InboundMessage
    session_key: str
    args: str
    services: Services
    #: the registry the command was found in (/help lists it)
    commands: CommandRegistry
    handoffs: Handoffs
    #: the turns of the chat's lanes (/retry answers again, /bg starts one of its own); None: a
    #: context built without them (a test of a command that needs none)
    turns: Turns | None = None


Handler = Callable[[CommandContext], Awaitable[str | None]]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    handler: Handler
    #: runs at once even while a turn runs (/stop, /status, /help, /queue);
    #: other commands wait their turn in the session's lane
    immediate: bool = False
    aliases: tuple[str, ...] = ()
    usage: str = ""
    #: for the gateway's owners only (the handler refuses others; /whoami lists it to owners)
    owner_only: bool = False


@dataclass
class CommandRegistry:
    _commands: dict[str, Command] = field(default_factory=dict)
    _names: dict[str, str] = field(default_factory=dict)

    def register(self, command: Command) -> Command:
        for name in (command.name, *command.aliases):
            if name in self._names:
                raise ValueError(f"command /{name} is registered twice")
            self._names[name] = command.name
        self._commands[command.name] = command
        return command

    def get(self, name: str) -> Command | None:
        canonical = self._names.get(name)
        return None if canonical is None else self._commands[canonical]

    def all(self) -> list[Command]:
        return list(self._commands.values())

    def help_text(self, skills: Sequence[tuple[str, str]] = ()) -> str:
        """The commands, then ``skills`` (command, description): the installed skills' commands."""
        lines = ["Commands:"]
        for cmd in self._commands.values():
            usage = f" {cmd.usage}" if cmd.usage else ""
            lines.append(f"/{cmd.name}{usage} — {cmd.help}")
        if skills:
            lines += ["", "Skills (/<skill> [what you want done]):"]
            lines += [f"/{name} — {' '.join(description.split())[:120]}" for name, description in skills]
        return "\n".join(lines)
