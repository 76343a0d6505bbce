"""The chat commands beyond the built-ins: sessions, titles, queue, home channels, handoff."""

from __future__ import annotations

from gateway.commands.misc import register_misc_commands
from gateway.commands.sessions import register_session_commands
from gateway.routing.commands import CommandRegistry

__all__ = ["register_chat_commands"]


def register_chat_commands(registry: CommandRegistry) -> None:
    register_session_commands(registry)
    register_misc_commands(registry)
