"""A platform's own command menu (Telegram's ``setMyCommands``, Discord's application commands).

An adapter whose platform has one implements ``CommandMenu``; the gateway gives it the list
(``gateway.commands.native``), already fitted to its ``MenuRules``: a name the platform would
refuse is left out by the gateway (with a warning), never sent to fail the whole list.
Slack has no API for it: slash commands are declared in the Slack app's manifest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["MENU_FOR_DISCORD", "MENU_FOR_TELEGRAM", "CommandMenu", "MenuCommand", "MenuRules"]


@dataclass(frozen=True)
class MenuRules:
    max_commands: int
    name: re.Pattern[str]
    max_description: int
    #: what the name pattern says, for the warning that skips a name
    name_rule: str


#: Bot API ``BotCommand``: 1-32 of ``a-z``, ``0-9``, ``_``; description 1-256; at most 100
MENU_FOR_TELEGRAM = MenuRules(100, re.compile(r"^[a-z0-9_]{1,32}$"), 256, "1-32 characters of a-z, 0-9 and _")
#: a CHAT_INPUT application command: 1-32 lowercase letters, digits, ``-`` or ``_``; description 1-100;
#: at most 100 of that type (global, and again per guild)
MENU_FOR_DISCORD = MenuRules(100, re.compile(r"^[-_a-z0-9]{1,32}$"), 100, "1-32 characters of a-z, 0-9, - and _")


@dataclass(frozen=True)
class MenuCommand:
    name: str
    description: str


@runtime_checkable
class CommandMenu(Protocol):
    """An adapter whose platform shows the bot's commands in a menu of its own."""

    menu_rules: MenuRules

    async def set_command_menu(self, commands: Sequence[MenuCommand]) -> None:
        """Replace the menu with ``commands`` (fitted to ``menu_rules``); raises on the platform's refusal."""
        ...
