"""The commands in the platforms' own menus: Telegram's ``setMyCommands``, Discord's application
commands (``adapters.commands.CommandMenu``).

Each platform gets the built-in commands, then the installed skills' (``SkillCommands``), fitted
to its rules: a name it would refuse is skipped with a warning, a description is cut to its
limit, and past its maximum count the rest are left out (skills last, so the built-ins stay).
A platform's menu is set when its adapter connects, and again when a scan of the skills folder
finds it changed, at most once per ``refresh_seconds``. Slack has no such API (its slash commands
live in the app's manifest), so nothing is sent there.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence

import structlog

from adapters.base import Adapter
from adapters.commands import CommandMenu, MenuCommand, MenuRules
from gateway.commands.skills import SkillCommands
from gateway.routing.commands import CommandRegistry

__all__ = ["NATIVE_REFRESH_SECONDS", "NativeMenus", "fit_menu"]

log = structlog.get_logger("hermes.native_commands")

#: the least time between two updates of a platform's menu after skills changed
NATIVE_REFRESH_SECONDS = 60.0


def _describe(text: str, limit: int, fallback: str) -> str:
    text = " ".join(text.split()) or fallback
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def fit_menu(rules: MenuRules, entries: Sequence[tuple[str, str]], platform: str) -> tuple[list[MenuCommand], list[str]]:
    """``entries`` (name, description) as the platform takes them, and a warning for each one left out."""
    menu: list[MenuCommand] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for name, description in entries:
        if not rules.name.fullmatch(name):
            warnings.append(f"/{name} is not in the {platform} command menu: a name there is {rules.name_rule}")
            continue
        if name in seen:
            continue
        if len(menu) >= rules.max_commands:
            warnings.append(f"/{name} is not in the {platform} command menu: it holds at most "
                            f"{rules.max_commands} commands (it still works when typed)")
            continue
        seen.add(name)
        menu.append(MenuCommand(name, _describe(description, rules.max_description, f"/{name}")))
    return menu, warnings


class NativeMenus:
    def __init__(self, registry: CommandRegistry, skills: SkillCommands | None, adapters: Mapping[str, Adapter],
                 refresh_seconds: float = NATIVE_REFRESH_SECONDS) -> None:
        self._registry = registry
        self._skills = skills
        self._adapters = adapters
        #: the least time between two menu updates after a change of the skills
        self.refresh_seconds = refresh_seconds
        self._last = 0.0
        self._pending: asyncio.Task[None] | None = None
        #: platform -> the menu last set there (what a test or /status may read)
        self.menus: dict[str, list[MenuCommand]] = {}
        #: platform -> the warnings of its last menu
        self.warnings: dict[str, list[str]] = {}
        if skills is not None:
            skills.on_change = self.changed

    def entries(self) -> list[tuple[str, str]]:
        out = [(c.name, c.help) for c in self._registry.all()]
        if self._skills is not None:
            out += self._skills.help_lines()
        return out

    async def register(self, platform: str) -> bool:
        """Set ``platform``'s menu (when its adapter has one); True when the platform took it."""
        adapter = self._adapters.get(platform)
        if not isinstance(adapter, CommandMenu):
            return False
        menu, warnings = fit_menu(adapter.menu_rules, self.entries(), platform)
        for w in warnings:
            if w not in self.warnings.get(platform, []):
                log.warning("commands.menu_skipped", platform=platform, detail=w)
        self.warnings[platform] = warnings
        try:
            await adapter.set_command_menu(menu)
        except Exception as exc:  # the menu is a convenience: typed commands work without it
            log.warning("commands.menu_failed", platform=platform, error=f"{type(exc).__name__}: {exc}"[:300])
            return False
        self._last = time.monotonic()
        self.menus[platform] = menu
        log.info("commands.menu_set", platform=platform, commands=len(menu))
        return True

    def changed(self) -> None:
        """The skills changed: update every connected platform's menu, within the refresh bound."""
        if self._pending is None or self._pending.done():
            self._pending = asyncio.get_running_loop().create_task(self._refresh(), name="command-menus")

    async def _refresh(self) -> None:
        await asyncio.sleep(max(0.0, self._last + self.refresh_seconds - time.monotonic()))
        for platform, adapter in self._adapters.items():
            if adapter.ready.is_set():
                await self.register(platform)

    async def aclose(self) -> None:
        if self._pending is not None and not self._pending.done():
            self._pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pending
