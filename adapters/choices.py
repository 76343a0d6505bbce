"""A menu of choices as adapters show it (the /model picker): its text, its options, and how a press
comes back.

The gateway asks an adapter that has menus (``ChoiceMenus``: Telegram's inline keyboard, Discord's
select menu, Slack's ``static_select``) to show one, and settles it (the menu message edited into
the outcome). As with approval buttons (``adapters.approvals``), a press comes back as an ordinary
``InboundMessage`` from the person who pressed, whose text is a command (``choice_command``), so
authorization, dedupe and the command's own checks (whose menu, still current) are one path. The
payload names the command, the menu and the option's index, so no adapter keeps state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .approvals import approval_command, parse_approval_data
from .base import OutboundMessage

__all__ = ["MAX_OPTIONS", "ChoiceMenus", "ChoicePrompt", "choice_command", "choice_data", "press_command"]

#: the most options a menu has (Discord's select menu takes 25)
MAX_OPTIONS = 25
#: the most characters of an option's label (Slack's option text takes 75, Discord's 100)
MAX_LABEL = 75

_COMMAND = re.compile(r"[a-z][a-z_]{0,15}")
_ID = re.compile(r"[A-Za-z0-9]{4,32}")
_DATA = re.compile(r"chs:([a-z][a-z_]{0,15}):([A-Za-z0-9]{4,32}):(\d{1,2})")


@dataclass(frozen=True)
class ChoicePrompt:
    #: the command a press becomes (``model``: ``/model --pick <id> <index>``)
    command: str
    #: the menu's id: [A-Za-z0-9]{4,32}
    menu_id: str
    #: plain text above the menu
    text: str
    #: the options' labels, in order; a press names its index
    options: tuple[str, ...]
    #: the index of the option in force now (marked, or preselected)
    current: int | None = None

    def __post_init__(self) -> None:
        if not _COMMAND.fullmatch(self.command) or not _ID.fullmatch(self.menu_id):
            raise ValueError("a menu's command is [a-z_]{1,16} and its id 4 to 32 letters and digits")
        if not 1 <= len(self.options) <= MAX_OPTIONS:
            raise ValueError(f"a menu has 1 to {MAX_OPTIONS} options")

    def label(self, index: int) -> str:
        text = " ".join(self.options[index].split()) or "…"
        return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"

    def data(self, index: int) -> str:
        return choice_data(self.command, self.menu_id, index)


def choice_data(command: str, menu_id: str, index: int) -> str:
    """An option's payload (Telegram callback_data ≤ 64 bytes, Discord custom_id/value ≤ 100, Slack value)."""
    return f"chs:{command}:{menu_id}:{index}"


def choice_command(command: str, menu_id: str, index: int) -> str:
    return f"/{command} --pick {menu_id} {index}"


def press_command(data: str | None) -> str | None:
    """The command a press's payload stands for: an approval's answer or a menu's option; None for a
    payload that is not ours (ignore it)."""
    approval = parse_approval_data(data) if data else None
    if approval is not None:
        return approval_command(*approval)
    match = _DATA.fullmatch(data or "")
    return choice_command(match.group(1), match.group(2), int(match.group(3))) if match else None


@runtime_checkable
class ChoiceMenus(Protocol):
    """An adapter that shows menus."""

    async def send_choices(self, target: OutboundMessage, prompt: ChoicePrompt) -> str | None:
        """Show ``prompt`` in ``target``'s chat (thread); the id of the menu's message."""

    async def settle_approval(self, target: OutboundMessage, message_id: str, outcome: str) -> None:
        """The menu's message edited to ``outcome``, its buttons or menu gone (as an approval's)."""
