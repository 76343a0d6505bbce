"""Approval questions on Discord: a message with three buttons out, a press back in as a command.

**Out.** ``send`` posts the question where the answer goes (``Sender.place``: the thread, opened first
when it is still to open) with one action row of three buttons: raw message components through
discord.py's REST client, not a discord.py ``View``. A ``View`` lives in one process: after a restart
its presses would reach nothing. Raw components carry everything in their ``custom_id``
(``approval_data``), so a press is understood by whichever process receives it. ``settle`` edits the
question to the outcome and removes its components.

**In.** A button press is a gateway ``INTERACTION_CREATE`` of type 3 (MESSAGE_COMPONENT). ``take`` reads
the raw payload (not discord.py's ``Interaction``, whose model needs fields a payload may lack), and:

1. acknowledges it at once with type 6 (DEFERRED_UPDATE_MESSAGE: nothing visible changes; the
   gateway settles the question itself). Discord wants a response within 3 s or shows "This
   interaction failed"; the ack goes out before the router sees the press.
2. if the ``custom_id`` is one of ours (``parse_approval_data``), dispatches an ``InboundMessage`` from
   the presser whose text is the command a person could type (``approval_command``), in the
   question's channel or thread, ``dedupe_id`` ``interaction:<id>`` (a RESUME replay is one press).
   Anything else is acknowledged and ignored.

A menu (``adapters.choices``, the /model picker) is a string select (component type 3) alone in an
action row, whose ``custom_id`` names the menu and each option's ``value`` its payload
(``choice_data``); a choice is an ``INTERACTION_CREATE`` of type 3 whose ``data.values`` holds it, taken
the same way. No state is kept here: a press on a settled question, or one from before a restart, reaches the
router like any other, and the gateway says it is expired or unknown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import discord
import structlog
from discord.http import Route

from .._dispatch import ChatOrderedDispatch
from .._text import clean_text
from ..approvals import APPROVAL_CHOICES, ApprovalChoice, ApprovalPrompt, approval_data
from ..base import AdapterError, InboundMessage, MessageHandler, OutboundMessage
from ..choices import ChoicePrompt, press_command
from ._inbound import PLATFORM, ChannelRef
from ._interaction import answerable, cached_place, interaction_message, mapping, respond, snowflake
from ._outbound import Sender

__all__ = ["ApprovalButtons", "approval_components", "press_to_inbound"]

log = structlog.get_logger("hermes.discord")

MAX_CONTENT = 2000
#: button styles: success (green), secondary (grey), danger (red)
BUTTON_STYLES: dict[ApprovalChoice, int] = {"approve": 3, "always": 2, "deny": 4}
ACTION_ROW, BUTTON, STRING_SELECT = 1, 2, 3
MESSAGE_COMPONENT = 3
DEFERRED_UPDATE_MESSAGE = 6
_UNKNOWN_CHANNEL, _UNKNOWN_MESSAGE = 10003, 10008


def _fit(text: str) -> str:
    text = clean_text(text).strip() or "…"
    return text if len(text) <= MAX_CONTENT else text[: MAX_CONTENT - 1] + "…"


def approval_components(approval_id: str, choices: tuple[tuple[ApprovalChoice, str], ...] = APPROVAL_CHOICES
                        ) -> list[dict[str, Any]]:
    """One action row with the answers (labels from ``APPROVAL_CHOICES``, or the prompt's own)."""
    buttons = [{"type": BUTTON, "style": BUTTON_STYLES[choice], "label": label,
                "custom_id": approval_data(approval_id, choice)} for choice, label in choices]
    return [{"type": ACTION_ROW, "components": buttons}]


def menu_components(prompt: ChoicePrompt) -> list[dict[str, Any]]:
    """One action row with one string select; the option in force is preselected."""
    options = [{"label": prompt.label(i), "value": prompt.data(i), "default": i == prompt.current}
               for i in range(len(prompt.options))]
    select = {"type": STRING_SELECT, "custom_id": f"chs:{prompt.command}:{prompt.menu_id}", "options": options,
              "placeholder": "Choose…", "min_values": 1, "max_values": 1}
    return [{"type": ACTION_ROW, "components": [select]}]


def _pressed(data: Mapping[str, Any]) -> str | None:
    """The payload of what was pressed: a button's ``custom_id``, or the one value chosen in a select."""
    if data.get("component_type") == STRING_SELECT:
        values = data.get("values")
        return values[0] if isinstance(values, list) and len(values) == 1 and isinstance(values[0], str) else None
    custom_id = data.get("custom_id")
    return custom_id if isinstance(custom_id, str) else None


def press_to_inbound(data: Any, cached: ChannelRef | None = None) -> InboundMessage | None:
    """A component interaction as the router's message; None when it is not a press of ours (or unreadable).
    ``cached``: where the channel sits by discord.py's cache, for a payload whose ``channel`` has no type."""
    if not isinstance(data, Mapping) or data.get("type") != MESSAGE_COMPONENT:
        return None
    command = press_command(_pressed(mapping(data.get("data"))))
    if command is None:
        return None
    return interaction_message(data, cached, text=command,
                               message_id=snowflake(mapping(data.get("message")).get("id")))


class ApprovalButtons:
    def __init__(self, sender: Sender, dispatch: MessageHandler) -> None:
        self._sender = sender
        self._dispatches = ChatOrderedDispatch(PLATFORM, dispatch)
        self._acks: set[asyncio.Task[None]] = set()
        #: presses acknowledged / acknowledgements Discord refused (for tests and /status)
        self.acknowledged = 0
        self.ack_failures = 0

    @property
    def pending(self) -> set[asyncio.Task[Any]]:
        return self._acks | self._dispatches.pending

    # ------------------------------------------------------------------ out

    async def send(self, target: OutboundMessage, prompt: ApprovalPrompt) -> str:
        return await self._post(target, prompt.text, approval_components(prompt.approval_id, prompt.choices),
                                prompt.approval_id)

    async def send_menu(self, target: OutboundMessage, prompt: ChoicePrompt) -> str:
        return await self._post(target, prompt.text, menu_components(prompt), prompt.menu_id)

    async def _post(self, target: OutboundMessage, text: str, components: list[dict[str, Any]], ref: str) -> str:
        payload: dict[str, Any] = {"content": _fit(text), "components": components,
                                   "allowed_mentions": {"parse": []}}
        if target.reply_to and target.reply_to != target.thread_id and target.reply_to.isdigit():
            # The question under the message that asked; in a thread started from it, it is there already.
            payload["message_reference"] = {"message_id": target.reply_to, "fail_if_not_exists": False}
        client, channel_id = await self._sender.place(target)
        try:
            try:
                sent = await client.http.request(Route("POST", "/channels/{channel_id}/messages",
                                                       channel_id=int(channel_id)), json=payload)
            except discord.NotFound as exc:
                if exc.code != _UNKNOWN_CHANNEL:
                    raise
                # A prospective thread of a turn recovered after a restart: open it, then ask there.
                client, channel_id = await self._sender.place(target, missing=True)
                sent = await client.http.request(Route("POST", "/channels/{channel_id}/messages",
                                                       channel_id=int(channel_id)), json=payload)
        except discord.HTTPException as exc:
            raise AdapterError(f"Discord refused the approval question ({exc.status}, code {exc.code}: "
                               f"{exc.text or 'no detail'})") from None
        except discord.RateLimited as exc:
            raise AdapterError(f"Discord rate limit: could not ask for approval (wait {exc.retry_after:.0f}s)") from None
        message_id = snowflake(sent.get("id")) if isinstance(sent, Mapping) else None
        if message_id is None:
            raise AdapterError("Discord answered the approval question without a message id")
        log.info("discord.approval_asked", channel_id=channel_id, message_id=message_id, ref=ref)
        return message_id

    async def settle(self, target: OutboundMessage, message_id: str, outcome: str) -> None:
        client, channel_id = await self._sender.place(target)
        route = Route("PATCH", "/channels/{channel_id}/messages/{message_id}", channel_id=int(channel_id),
                      message_id=int(message_id))
        try:
            await client.http.request(route, json={"content": _fit(outcome), "components": []})
        except discord.NotFound as exc:
            if exc.code in (_UNKNOWN_MESSAGE, _UNKNOWN_CHANNEL):
                # Deleted meanwhile: nothing is left to show buttons on.
                log.info("discord.approval_gone", channel_id=channel_id, message_id=message_id)
                return
            raise AdapterError(f"Discord refused to settle the approval question ({exc.status}, code {exc.code})") from None
        except discord.HTTPException as exc:
            raise AdapterError(f"Discord refused to settle the approval question ({exc.status}, code {exc.code}: "
                               f"{exc.text or 'no detail'})") from None
        except discord.RateLimited as exc:
            raise AdapterError(f"Discord rate limit: could not settle the question (wait {exc.retry_after:.0f}s)") from None

    # ------------------------------------------------------------------- in

    def take(self, data: Any, client: discord.Client | None) -> None:
        """An ``INTERACTION_CREATE`` payload, as the gateway sent it (called in discord.py's receive loop:
        it never waits). Presses are acknowledged, then ours go to the router."""
        answer = answerable(data, MESSAGE_COMPONENT, client)  # commands, modals: not ours to answer
        if answer is None or client is None:
            return
        interaction_id, token = answer
        task = asyncio.create_task(self._ack_then_dispatch(client, interaction_id, token, data),
                                   name=f"discord:press:{interaction_id}")
        self._acks.add(task)
        task.add_done_callback(self._acks.discard)

    async def _ack_then_dispatch(self, client: discord.Client, interaction_id: str, token: str,
                                 data: Mapping[str, Any]) -> None:
        if await respond(client, interaction_id, token, {"type": DEFERRED_UPDATE_MESSAGE}):
            self.acknowledged += 1
        else:
            self.ack_failures += 1
        try:
            inbound = press_to_inbound(data, cached_place(client, data))
        except Exception as exc:  # an odd payload must cost nothing but this press
            log.warning("discord.interaction_malformed", interaction_id=interaction_id, error=type(exc).__name__)
            return
        if inbound is None:
            log.info("discord.interaction_ignored", interaction_id=interaction_id)
            return
        self._dispatches.schedule(inbound)
