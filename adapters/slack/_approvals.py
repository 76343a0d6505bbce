"""Approval questions on Slack: Block Kit buttons out, a ``block_actions`` press back in as a command.

**Out.** ``send`` posts the question in the answer's channel and thread: a section with the text and
an actions block of three buttons (``action_id`` ``hermes_approval_<choice>``, ``value`` =
``approval_data``; approve ``primary``, deny ``danger``), with ``text`` as the fallback (the question
with the commands to type) for notifications and clients without blocks. ``settle`` replaces the
blocks with a section showing the outcome: no buttons are left to press.

**In.** A press is an ``interactive`` payload of type ``block_actions``, over the socket (an
``interactive`` envelope) or, in HTTP mode, a signed form POST (``payload=<json>``). The transport
acknowledges it first (``_socket``, ``_http``); then ``action_to_inbound`` turns a button of ours
(``parse_approval_data`` on its ``value``) into the command a person could type, from the presser, in
the question's channel and thread, ``dedupe_id`` ``action:<user>:<action_ts>``. A menu
(``adapters.choices``, the /model picker) is a section and a ``static_select`` (option values
``choice_data``); a choice is a ``block_actions`` whose action carries ``selected_option``, taken the
same way (``press_command``). Anything else is
ignored. Nothing is remembered here: a press after a restart or on a settled question reaches the
router, and the gateway answers it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from .._text import clean_text
from ..approvals import ApprovalChoice, ApprovalPrompt, approval_data
from ..base import AdapterError, ChatType, InboundMessage, OutboundMessage
from ..choices import ChoicePrompt, press_command
from ._inbound import PLATFORM
from ._webapi import api_error

__all__ = ["ACTION_PREFIX", "ApprovalButtons", "action_to_inbound", "approval_blocks", "settled_blocks"]

log = structlog.get_logger("hermes.slack")

#: the ``dedupe_id`` prefix of a press (a press gets no "thinking" placeholder: see ``_intake``)
ACTION_PREFIX = "action:"
#: Slack's limit on a section's text
SECTION_MAX = 3000
BUTTON_STYLES: dict[ApprovalChoice, str | None] = {"approve": "primary", "always": None, "deny": "danger"}


def _escape(text: str) -> str:
    """Plain text as mrkdwn (the fallback ``text``): Slack reads only these three as markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _section(text: str) -> dict[str, Any]:
    text = clean_text(text).strip() or "…"
    if len(text) > SECTION_MAX:
        text = text[: SECTION_MAX - 1] + "…"
    return {"type": "section", "text": {"type": "plain_text", "text": text, "emoji": True}}


def approval_blocks(prompt: ApprovalPrompt) -> list[dict[str, Any]]:
    buttons: list[dict[str, Any]] = []
    for choice, label in prompt.choices:
        button: dict[str, Any] = {"type": "button", "action_id": f"hermes_approval_{choice}",
                                  "text": {"type": "plain_text", "text": label, "emoji": True},
                                  "value": approval_data(prompt.approval_id, choice)}
        style = BUTTON_STYLES[choice]
        if style is not None:
            button["style"] = style
        buttons.append(button)
    return [{**_section(prompt.text), "block_id": "hermes_approval_question"},
            {"type": "actions", "block_id": f"hermes_approval_{prompt.approval_id}", "elements": buttons}]


def menu_blocks(prompt: ChoicePrompt) -> list[dict[str, Any]]:
    """The menu's text, then a ``static_select`` of its options (the one in force preselected)."""
    options = [{"text": {"type": "plain_text", "text": prompt.label(i), "emoji": True}, "value": prompt.data(i)}
               for i in range(len(prompt.options))]
    select: dict[str, Any] = {"type": "static_select", "action_id": f"hermes_menu_{prompt.command}",
                              "placeholder": {"type": "plain_text", "text": "Choose…", "emoji": True},
                              "options": options}
    if prompt.current is not None:
        select["initial_option"] = options[prompt.current]
    return [{**_section(prompt.text), "block_id": "hermes_menu_text"},
            {"type": "actions", "block_id": f"hermes_menu_{prompt.menu_id}", "elements": [select]}]


def settled_blocks(outcome: str) -> list[dict[str, Any]]:
    return [{**_section(outcome), "block_id": "hermes_approval_outcome"}]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def action_to_inbound(payload: Any) -> InboundMessage | None:
    """A ``block_actions`` payload as the router's message; None when no button of ours was pressed."""
    body = _mapping(payload)
    if body.get("type") != "block_actions" or not isinstance(body.get("actions"), list):
        return None
    action, command = None, None
    for candidate in body["actions"]:
        value = _mapping(candidate).get("value") or _mapping(_mapping(candidate).get("selected_option")).get("value")
        command = press_command(value) if isinstance(value, str) else None
        if command is not None:
            action = _mapping(candidate)
            break
    user = _str(_mapping(body.get("user")).get("id"))
    container, message = _mapping(body.get("container")), _mapping(body.get("message"))
    channel = _str(_mapping(body.get("channel")).get("id")) or _str(container.get("channel_id"))
    if action is None or command is None or user is None or channel is None:
        return None
    ts = _str(message.get("ts")) or _str(container.get("message_ts"))
    thread = _str(message.get("thread_ts")) or _str(container.get("thread_ts"))
    if thread is not None and thread == ts:
        thread = None  # the parent of a thread is not in it
    if channel.startswith("D"):
        chat_type = ChatType.DM
    else:
        chat_type = ChatType.THREAD if thread is not None else ChatType.CHANNEL
    stamp = _str(action.get("action_ts")) or _str(body.get("trigger_id")) or ts
    name = _mapping(body.get("user")).get("name") or _mapping(body.get("user")).get("username")
    return InboundMessage(
        platform=PLATFORM,
        chat_id=channel,
        chat_type=chat_type,
        user_id=user,
        text=command,
        message_id=ts,
        thread_id=thread,
        user_name=clean_text(name) if isinstance(name, str) else None,
        dedupe_id=f"{ACTION_PREFIX}{user}:{stamp}" if stamp else None,
        redeliverable=stamp is not None,
        addressed=True,
    )


class ApprovalButtons:
    def __init__(self, client: Callable[[], AsyncWebClient | None]) -> None:
        self._client = client

    def _require_client(self) -> AsyncWebClient:
        client = self._client()
        if client is None:
            raise AdapterError("the Slack adapter is not connected")
        return client

    async def send(self, target: OutboundMessage, prompt: ApprovalPrompt) -> str:
        return await self._post(target, prompt.typed(), approval_blocks(prompt), prompt.approval_id)

    async def send_menu(self, target: OutboundMessage, prompt: ChoicePrompt) -> str:
        return await self._post(target, prompt.text, menu_blocks(prompt), prompt.menu_id)

    async def _post(self, target: OutboundMessage, fallback: str, blocks: list[dict[str, Any]], ref: str) -> str:
        client = self._require_client()
        try:
            resp = await client.chat_postMessage(channel=target.chat_id, thread_ts=target.thread_id,
                                                 text=_escape(fallback), blocks=blocks)
        except SlackApiError as exc:
            raise AdapterError(f"Slack refused the approval question ({api_error(exc)})") from None
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            raise AdapterError(f"Slack could not post the approval question ({type(exc).__name__})") from None
        ts = resp.get("ts")
        if not isinstance(ts, str):
            raise AdapterError("Slack chat.postMessage answered without a ts")
        log.info("slack.approval_asked", chat_id=target.chat_id, ts=ts, ref=ref)
        return ts

    async def settle(self, target: OutboundMessage, message_id: str, outcome: str) -> None:
        client = self._require_client()
        try:
            await client.chat_update(channel=target.chat_id, ts=message_id, text=_escape(outcome or "…"),
                                     blocks=settled_blocks(outcome))
        except SlackApiError as exc:
            error = api_error(exc)
            if error == "message_not_found":
                log.info("slack.approval_gone", chat_id=target.chat_id, ts=message_id)  # deleted: nothing to settle
                return
            raise AdapterError(f"Slack refused to settle the approval question ({error})") from None
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            raise AdapterError(f"Slack could not settle the approval question ({type(exc).__name__})") from None
