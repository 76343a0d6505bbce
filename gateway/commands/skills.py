"""Skills as commands: each installed skill is ``/<skill-name> [args]``.

The turn runs with the skill invoked: its SKILL.md (read again at the call, so an edit counts at
once) goes before the person's words as one user message, with the names of its supporting files
for ``skill_view``. That message is stored as the turn's question, as the agent design has it: the
conversation keeps what was asked.

A skill's command is its name with ``-`` as ``_`` (``parse_command`` reads ``/deploy-docker`` as
``deploy_docker``); a name the command parser cannot read (it starts with a digit or holds a
``.``) has no command. A built-in command of the same name wins; ``hermes-gateway doctor`` warns.

Skills installed while the daemon runs: the list is scanned again on ``/help`` and when a command
is not found (a new skill answers at once), and platforms with native command menus get the new
list (``gateway.commands.native``), at most once per ``NATIVE_REFRESH_SECONDS``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import structlog

from core import SkillError, SkillMeta, SkillNeeds, SkillNotFoundError, SkillStore
from core.skills import parse_frontmatter
from gateway.routing.commands import CommandRegistry
from gateway.routing.services import SkillCall

__all__ = ["SkillCommands", "command_name", "skill_clashes"]

log = structlog.get_logger("hermes.skill_commands")

#: what parse_command can read as a command name (lowercased, ``-`` as ``_``)
_COMMAND = re.compile(r"^[a-z][a-z0-9_]*$")


def command_name(skill: str) -> str | None:
    """The command a skill is called by, or None when no chat command can name it."""
    name = skill.lower().replace("-", "_")
    return name if _COMMAND.fullmatch(name) else None


@dataclass(frozen=True)
class SkillCommand:
    command: str
    skill: str
    description: str


def _scan(home: Path, needs: SkillNeeds, builtins: Callable[[str], bool]) -> tuple[dict[str, SkillCommand], list[str]]:
    """The skills' commands, and a warning for each skill that has none."""
    commands: dict[str, SkillCommand] = {}
    warnings: list[str] = []
    for meta in SkillStore(home, needs).index():
        name = command_name(meta.name)
        if name is None:
            warnings.append(f"skill {meta.name!r} has no command: a command name starts with a letter and holds "
                            "only letters, digits, '-' and '_'")
        elif builtins(name):
            warnings.append(f"skill {meta.name!r} is not callable as /{name}: the built-in /{name} wins "
                            "(rename the skill's folder and its frontmatter name)")
        elif name in commands:
            warnings.append(f"skill {meta.name!r} is not callable as /{name}: skill "
                            f"{commands[name].skill!r} has that command")
        else:
            commands[name] = SkillCommand(name, meta.name, meta.description)
    return commands, warnings


def skill_clashes(home: Path, registry: CommandRegistry, needs: SkillNeeds | None = None) -> list[str]:
    """Why some installed skills are not commands (``hermes-gateway doctor`` prints it)."""
    return _scan(home, needs or SkillNeeds(), lambda n: registry.get(n) is not None)[1]


def invocation_text(meta: SkillMeta, content: str, files: Iterable[str], command: str, args: str) -> str:
    """The user message of a skill's call: the skill, then what the person asked."""
    _, body = parse_frontmatter(content)
    lines = [f'[The user called the skill "{meta.name}" with /{command}: follow its instructions, loaded below, '
             "for this request.]", "", body.strip()]
    listed = list(files)
    if listed:
        lines += ["", f"Supporting files of this skill (load one with skill_view, name {meta.name!r}): "
                  + ", ".join(listed)]
    lines.append("")
    lines.append(f"The user's request: {args}" if args else
                 "The user gave no further instructions: carry out the skill as it describes.")
    return "\n".join(lines)


class SkillCommands:
    """The installed skills as commands, for the router (``Services.skill_commands``) and /help."""

    def __init__(self, home: Path, registry: CommandRegistry, env_names: frozenset[str] | None = None) -> None:
        self._home = Path(home)
        self._registry = registry
        # Toolsets are not checked here: a skill the chat's tools cannot follow is told by the model.
        self._needs = SkillNeeds(None, env_names)
        self._commands: dict[str, SkillCommand] = {}
        #: every command a skill had since start: a miss on one of these is a removed skill
        self._known: set[str] = set()
        self.warnings: list[str] = []
        #: called with the new list when a scan finds it changed (native menus follow)
        self.on_change: Callable[[], None] | None = None

    def scan(self) -> bool:
        """Read the skills folder again (disk work: call it off the event loop); True when it changed."""
        commands, warnings = _scan(self._home, self._needs, lambda n: self._registry.get(n) is not None)
        changed = commands != self._commands
        for w in warnings:
            if w not in self.warnings:
                log.warning("skills.command_skipped", detail=w)
        self._commands, self.warnings = commands, warnings
        self._known |= set(commands)
        return changed

    async def refresh(self) -> None:
        if await asyncio.to_thread(self.scan) and self.on_change is not None:
            self.on_change()

    def all(self) -> list[SkillCommand]:
        return sorted(self._commands.values(), key=lambda c: c.command)

    def help_lines(self) -> list[tuple[str, str]]:
        return [(c.command, c.description or f"the skill {c.skill}") for c in self.all()]

    async def call(self, name: str, args: str) -> SkillCall | None:
        """The turn text of ``/name args`` when ``name`` is a skill's command; None when it is no
        skill's (after a fresh look, for a skill installed since)."""
        command = self._commands.get(name)
        if command is None:
            await self.refresh()
            command = self._commands.get(name)
        if command is None:
            if name in self._known:
                return SkillCall(reply=f"The skill behind /{name} was removed. Send /help for the commands "
                                       "and skills there are now.")
            return None
        try:
            return SkillCall(text=await asyncio.to_thread(self._invocation, command, args))
        except SkillNotFoundError:
            await self.refresh()
            return SkillCall(reply=f"The skill {command.skill!r} (/{name}) was removed. Send /help for the "
                                   "commands and skills there are now.")
        except SkillError as exc:
            return SkillCall(reply=f"/{name} cannot run: {exc}")

    def _invocation(self, command: SkillCommand, args: str) -> str:
        store = SkillStore(self._home, self._needs)
        content = store.view(command.skill)
        meta = next((m for m in store.index() if m.name == command.skill), None)
        if meta is None:
            raise SkillNotFoundError(command.skill)
        return invocation_text(meta, content, store.files(command.skill), command.command, args)
