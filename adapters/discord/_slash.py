"""Slash commands on Discord: the gateway's commands as the application's commands, and an invocation
back in as the command typed.

**Out.** ``set_menu`` replaces the application's global commands with the list the gateway gives
(``PUT /applications/{id}/commands``, a bulk overwrite: what is not in it is deleted). Each is a
CHAT_INPUT command with one optional string option, ``args`` (what follows the command when typed).

**In.** An invocation is a gateway ``INTERACTION_CREATE`` of type 2 (APPLICATION_COMMAND). ``take``
answers it at once with type 4 (CHANNEL_MESSAGE_WITH_SOURCE) showing the command as typed (Discord
wants an answer within 3 s), then dispatches an ``InboundMessage`` from the invoker whose text is
``/name args``, in the interaction's channel or thread, ``dedupe_id`` ``interaction:<id>``. The
router then treats it as a typed command; the answer comes as an ordinary message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import discord
import structlog
from discord.http import Route

from .._dispatch import ChatOrderedDispatch
from .._text import clean_text
from ..base import AdapterError, InboundMessage, MessageHandler
from ..commands import MenuCommand
from ._inbound import PLATFORM
from ._interaction import answerable, cached_place, interaction_message, mapping, respond

__all__ = ["SlashCommands", "command_options", "invocation_to_inbound"]

log = structlog.get_logger("hermes.discord")

APPLICATION_COMMAND = 2
CHANNEL_MESSAGE_WITH_SOURCE = 4
CHAT_INPUT, STRING = 1, 3
ARGS = "args"


def command_options() -> list[dict[str, Any]]:
    return [{"type": STRING, "name": ARGS, "description": "what you want done (optional)", "required": False}]


def invocation_text(data: Mapping[str, Any]) -> str | None:
    """``/name args`` of an APPLICATION_COMMAND payload's ``data``; None when it has no usable name."""
    name = data.get("name")
    if not isinstance(name, str) or not name or len(name) > 32:
        return None
    args = " ".join(str(o.get("value")) for o in data.get("options") or []
                    if isinstance(o, Mapping) and o.get("type") == STRING and o.get("value") is not None)
    return f"/{name} {args}".strip()


def invocation_to_inbound(data: Any, cached: Any = None) -> InboundMessage | None:
    """A slash command's interaction as the router's message; None when unreadable (or a group DM)."""
    if not isinstance(data, Mapping) or data.get("type") != APPLICATION_COMMAND:
        return None
    text = invocation_text(mapping(data.get("data")))
    if text is None:
        return None
    # No message of the person's: the answer replies to none.
    return interaction_message(data, cached, text=clean_text(text), message_id=None)


class SlashCommands:
    def __init__(self, dispatch: MessageHandler) -> None:
        self._dispatches = ChatOrderedDispatch(PLATFORM, dispatch)
        self._acks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> set[asyncio.Task[Any]]:
        return self._acks | self._dispatches.pending

    async def set_menu(self, client: discord.Client | None, commands: Sequence[MenuCommand]) -> None:
        if client is None or client.application_id is None:
            raise AdapterError("discord is not connected")
        body = [{"type": CHAT_INPUT, "name": c.name, "description": c.description, "options": command_options()}
                for c in commands]
        route = Route("PUT", "/applications/{application_id}/commands", application_id=client.application_id)
        try:
            await client.http.request(route, json=body)
        except discord.HTTPException as exc:
            raise AdapterError(f"Discord refused the commands ({exc.status}, code {exc.code}: "
                               f"{exc.text or 'no detail'})") from None

    def take(self, data: Any, client: discord.Client | None) -> None:
        """An ``INTERACTION_CREATE`` payload (in discord.py's receive loop: it never waits)."""
        answer = answerable(data, APPLICATION_COMMAND, client)
        if answer is None or client is None:
            return
        interaction_id, token = answer
        task = asyncio.create_task(self._answer_then_dispatch(client, interaction_id, token, data),
                                   name=f"discord:slash:{interaction_id}")
        self._acks.add(task)
        task.add_done_callback(self._acks.discard)

    async def _answer_then_dispatch(self, client: discord.Client, interaction_id: str, token: str,
                                    data: Mapping[str, Any]) -> None:
        try:
            inbound = invocation_to_inbound(data, cached_place(client, data))
        except Exception as exc:  # an odd payload must cost nothing but this invocation
            log.warning("discord.interaction_malformed", interaction_id=interaction_id, error=type(exc).__name__)
            inbound = None
        shown = inbound.text if inbound is not None else "That command could not be read."
        await respond(client, interaction_id, token, {
            "type": CHANNEL_MESSAGE_WITH_SOURCE,
            "data": {"content": f"`{shown[:1990]}`", "allowed_mentions": {"parse": []}}})
        if inbound is not None:
            self._dispatches.schedule(inbound)
