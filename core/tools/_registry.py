"""The tool registry: what the model may call, and the one door every call goes through.

``dispatch`` never raises for a bad call: unknown tools, undecodable or
invalid arguments, a ``ToolError`` and any unexpected exception all come
back as a tool result the model can read and act on. Only cancellation
(``/stop``) passes through.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import structlog
from jsonschema.exceptions import SchemaError

from ._base import Tool, ToolContext, ToolError

log = structlog.get_logger("hermes.tools")

_TRUNCATED = "\n…[result truncated: {cut} of {total} characters left out]"


@dataclass(frozen=True)
class ToolsetPolicy:
    """Which toolsets a platform may use: ``enabled`` (None = all) minus ``disabled``.

    A toolset ``family:member`` (``mcp:github``) is named either way: ``mcp`` covers every MCP
    server, ``mcp:github`` only that one. It is allowed when neither name is disabled and, when
    ``enabled`` is given, either name is in it.
    """

    enabled: frozenset[str] | None = None
    disabled: frozenset[str] = frozenset()

    def allows(self, toolset: str) -> bool:
        names = _names(toolset)
        if not self.disabled.isdisjoint(names):
            return False
        return self.enabled is None or not self.enabled.isdisjoint(names)


def _names(toolset: str) -> tuple[str, ...]:
    family, sep, _ = toolset.partition(":")
    return (toolset, family) if sep and family else (toolset,)


#: chat types where several people share the agent
GROUP_CHAT_TYPES = frozenset({"group", "channel", "thread"})


@dataclass(frozen=True)
class GroupToolPolicy:
    """What is off where several people share the agent: the ``terminal`` toolset and tools tagged
    ``writes``, unless config allows them there (``tools.groups.terminal`` / ``file_writes``)."""

    terminal: bool = False
    file_writes: bool = False

    def blocks(self, tool: Tool, chat_type: str | None) -> str | None:
        """Why ``tool`` is off in a chat of ``chat_type`` (None: it is not)."""
        if chat_type not in GROUP_CHAT_TYPES:
            return None
        if tool.toolset == "terminal":  # the terminal writes too, but has its own switch
            return None if self.terminal else "terminal"
        if "writes" in tool.tags and not self.file_writes:
            return "file_writes"
        return None


@dataclass(frozen=True)
class ToolOutcome:
    """One dispatched call: the text for the model, and whether it failed."""

    content: str
    ok: bool


class ToolRegistry:
    """Tools by name; a filtered view per platform via ``for_platform``."""

    def __init__(self, tools: Iterable[Tool] = (), *, max_result_chars: int | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        #: tools a view leaves out for the kind of chat (name -> the ``tools.groups`` key that does)
        self._off_here: dict[str, str] = {}
        #: ``agent.max_tool_result_kb``: no result is longer, whatever its tool allows (None: the tool's own)
        self.max_result_chars = max_result_chars
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        cls = jsonschema.validators.validator_for(dict(tool.parameters))
        try:
            cls.check_schema(dict(tool.parameters))
        except SchemaError as exc:
            raise ValueError(f"tool {tool.name!r} has an invalid parameters schema: {exc.message}") from exc
        self._tools[tool.name] = tool
        self._validators[tool.name] = cls(dict(tool.parameters))

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def toolsets(self) -> frozenset[str]:
        """The toolsets the registered tools belong to, families too (``mcp`` for ``mcp:github``),
        so a skill that requires ``mcp`` is shown when any MCP server's tools are on offer."""
        return frozenset(name for t in self._tools.values() for name in _names(t.toolset))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def for_platform(self, policy: ToolsetPolicy, chat_type: str | None = None,
                     groups: GroupToolPolicy | None = None) -> ToolRegistry:
        """A registry holding only the tools on offer: toolset allowed by ``policy``, not off in
        this kind of chat (``groups``, when ``chat_type`` is a group's), not ``unavailable``."""
        view = ToolRegistry(max_result_chars=self.max_result_chars)
        for tool in self._tools.values():
            if tool.unavailable is not None:
                continue
            if groups is not None and (which := groups.blocks(tool, chat_type)) is not None:
                view._off_here[tool.name] = which
                continue
            if policy.allows(tool.toolset):
                view._tools[tool.name] = tool
                view._validators[tool.name] = self._validators[tool.name]
        return view

    def merged(self, tools: Iterable[Tool]) -> tuple[ToolRegistry, list[str]]:
        """This registry plus ``tools`` (schemas checked as in ``register``); the names left out
        because a tool of that name is here already, or because its schema is invalid."""
        view = ToolRegistry(max_result_chars=self.max_result_chars)
        view._tools, view._validators = dict(self._tools), dict(self._validators)
        view._off_here = dict(self._off_here)
        skipped: list[str] = []
        for tool in tools:
            try:
                view.register(tool)
            except ValueError:
                skipped.append(tool.name)
        return view, skipped

    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def only(self, names: Iterable[str]) -> ToolRegistry:
        """A registry holding just the named tools that exist here."""
        wanted = set(names)
        view = ToolRegistry(max_result_chars=self.max_result_chars)
        for name, tool in self._tools.items():
            if name in wanted:
                view._tools[name] = tool
                view._validators[name] = self._validators[name]
        return view

    def in_toolsets(self, toolsets: Iterable[str]) -> ToolRegistry:
        """Only the tools of ``toolsets`` (a family names all its sets: ``mcp`` for ``mcp:github``)."""
        wanted = set(toolsets)
        return self.only(t.name for t in self._tools.values() if wanted.intersection(_names(t.toolset)))

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` array."""
        return [tool.schema() for tool in self._tools.values()]

    async def dispatch(self, name: str, arguments: str | Mapping[str, Any] | None, ctx: ToolContext) -> ToolOutcome:
        tool = self._tools.get(name)
        if tool is None and (which := self._off_here.get(name)) is not None:
            return ToolOutcome(f"Error: {name} is off in groups and channels (config tools.groups.{which}), so "
                               "it was not run. Do not retry here; tell the user it works in a direct chat.", False)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return ToolOutcome(f"Error: there is no tool named {name!r}. Available tools: {known}.", False)
        args = _decode(arguments)
        if isinstance(args, str):
            return ToolOutcome(f"Error: the arguments for {name} are not a JSON object ({args}). "
                               "Send the arguments as a JSON object matching the tool's schema.", False)
        limit = tool.max_result_chars if self.max_result_chars is None else min(tool.max_result_chars,
                                                                                  self.max_result_chars)
        problems = sorted(self._validators[name].iter_errors(args), key=lambda e: list(e.absolute_path))
        if problems:
            described = "; ".join(_describe(p) for p in problems[:5])
            return ToolOutcome(f"Error: invalid arguments for {name}: {described}.", False)
        try:
            result = await tool.handler(args, ctx)
        except asyncio.CancelledError:
            raise
        except ToolError as exc:
            return ToolOutcome(_truncate(f"Error: {exc}", limit), False)
        except Exception as exc:
            # A bug in a tool must not end the turn; the model hears that it failed, the log gets the trace.
            log.exception("tool.crashed", tool=name)
            return ToolOutcome(f"Error: the {name} tool failed unexpectedly ({type(exc).__name__}). "
                               "Try different arguments or another approach.", False)
        if not isinstance(result, str):
            result = json.dumps(result, ensure_ascii=False, default=str)
        return ToolOutcome(_truncate(result, limit), True)


def _decode(arguments: str | Mapping[str, Any] | None) -> dict[str, Any] | str:
    """The arguments as a dict, or a short reason why they are not one."""
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return f"invalid JSON: {exc.msg} at position {exc.pos}"
    if not isinstance(value, dict):
        return f"got a JSON {type(value).__name__}"
    return value


def _describe(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def _truncate(text: str, limit: int) -> str:
    """At most ``limit`` characters, with a note that says how much was cut (the note fits the limit)."""
    if len(text) <= limit:
        return text
    keep = max(limit - 100, 0)  # the note is well under 100 characters
    return text[:keep] + _TRUNCATED.format(cut=len(text) - keep, total=len(text))
