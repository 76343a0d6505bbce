"""Approval questions on Telegram: a message with three inline buttons, edited into its outcome,
and a press (a ``callback_query``) turned into the command a person could type.

The question is plain text (no MarkdownV2): the action is shown verbatim, and a command is full of
characters MarkdownV2 would want escaped. It is placed as a reply is (its topic, quoting the
question in a group), as a message of its own, so a streamed answer never edits over it.

A model menu (``adapters.choices``) is the same kind of message: an inline keyboard, one option a row,
``callback_data`` ``chs:<command>:<menu>:<index>``. A press becomes
``InboundMessage(text=approval_command(id, choice))`` (or the menu's ``choice_command``) from the presser, in the chat
(and topic) of the question's message, with ``dedupe_id = "cbq:<callback id>"`` (Telegram delivers
a press again like any update). It is acknowledged first (``answerCallbackQuery``: the client
stops its spinner); what the press did shows as the question's edit, or as a reply from the
gateway when it was refused. A press of a button that is not ours, or whose message is gone, is
acknowledged and ignored.
"""

from __future__ import annotations

import structlog
from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.error import BadRequest, TelegramError

from .._text import clean_text
from ..approvals import APPROVAL_CHOICES, ApprovalChoice, ApprovalPrompt, approval_data
from ..base import ChatType, InboundMessage, MalformedUpdateError, OutboundMessage
from ..choices import ChoicePrompt, press_command
from ._client import BotConnection
from ._inbound import PLATFORM
from ._outbound import Sender

__all__ = ["ApprovalButtons", "Press", "to_press"]

log = structlog.get_logger("hermes.telegram")

_CHAT_TYPES = {"private": ChatType.DM, "group": ChatType.GROUP, "supergroup": ChatType.GROUP}


def keyboard(approval_id: str, choices: tuple[tuple[ApprovalChoice, str], ...] = APPROVAL_CHOICES
             ) -> InlineKeyboardMarkup:
    """One row: Approve, Always, Deny (``callback_data`` ``apv:<choice>:<id>``, far below 64 bytes)."""
    return InlineKeyboardMarkup([[InlineKeyboardButton(label, callback_data=approval_data(approval_id, choice))
                                  for choice, label in choices]])


def menu_keyboard(prompt: ChoicePrompt) -> InlineKeyboardMarkup:
    """One option a row, the one in force marked."""
    return InlineKeyboardMarkup([[InlineKeyboardButton(("✓ " if i == prompt.current else "") + prompt.label(i),
                                                       callback_data=prompt.data(i))]
                                 for i in range(len(prompt.options))])


class ApprovalButtons:
    def __init__(self, sender: Sender, connection: BotConnection) -> None:
        self._sender = sender
        self._connection = connection

    async def send(self, target: OutboundMessage, prompt: ApprovalPrompt) -> str:
        return await self._post(target, prompt.text, keyboard(prompt.approval_id, prompt.choices))

    async def send_menu(self, target: OutboundMessage, prompt: ChoicePrompt) -> str:
        return await self._post(target, prompt.text, menu_keyboard(prompt))

    async def _post(self, target: OutboundMessage, question: str, markup: InlineKeyboardMarkup) -> str:
        text = clean_text(question)
        async with self._sender.batch(target.chat_id) as bot:
            where = await self._sender.place(bot, target)

            async def post(t: object) -> int:
                return await bot.send_raw_message(where.chat, text, parse_mode=None, thread=where.thread,
                                                  reply=where.reply, markup=markup)

            sent = await self._sender.call(target.chat_id, where, post)
            self._sender.placed(target)
        return str(sent)

    async def settle(self, target: OutboundMessage, message_id: str, outcome: str) -> None:
        async with self._sender.batch(target.chat_id) as bot:
            where = await self._sender.place(bot, target)

            async def edit(t: object) -> None:
                # No reply_markup: the buttons go, so nobody presses an answered question.
                await bot.edit_raw_message_text(where.chat, int(message_id), clean_text(outcome), parse_mode=None)

            try:
                await self._sender.call(target.chat_id, where, edit)
            except BadRequest as exc:
                if "not modified" not in exc.message.lower():
                    raise

    async def acknowledge(self, query_id: str) -> None:
        """answerCallbackQuery: the presser's client stops waiting. A press 15 minutes old (or one
        Telegram forgot) is refused by Telegram; the press still counts (or is refused) as it is."""
        try:
            bot = await self._connection.ensure()
            await bot.answer_callback_query(query_id)
        except TelegramError as exc:
            log.info("telegram.callback_answer_failed", error=exc.message)


class Press:
    """A button press: the callback to acknowledge, and the message for the router (None: not ours)."""

    def __init__(self, query_id: str, message: InboundMessage | None) -> None:
        self.query_id = query_id
        self.message = message


def to_press(update: Update) -> Press | None:
    """The press in ``update`` (None when it holds none). Raises ``MalformedUpdateError`` (or what a
    broken field raises) on bad data."""
    query = update.callback_query
    if not isinstance(query, CallbackQuery):
        return None
    if not isinstance(query.id, str) or not query.id:
        raise MalformedUpdateError("callback_query.id is not a string")
    data = query.data if isinstance(query.data, str) else None
    command = press_command(data)
    message = query.message
    sender = query.from_user
    if command is None or not isinstance(message, Message) or sender is None or sender.is_bot is not False:
        return Press(query.id, None)  # not our button, or its message is too old to be shown to us
    chat = message.chat
    chat_type = _CHAT_TYPES.get(chat.type) if isinstance(chat.type, str) else None
    if chat_type is None or not isinstance(chat.id, int) or not isinstance(sender.id, int):
        return Press(query.id, None)
    thread_id: str | None = None
    if chat.is_forum is True and message.is_topic_message is True and isinstance(message.message_thread_id, int):
        thread_id = str(message.message_thread_id)
    first = sender.first_name if isinstance(sender.first_name, str) else ""
    last = sender.last_name if isinstance(sender.last_name, str) else ""
    name = f"{first} {last}".strip() or (sender.username if isinstance(sender.username, str) else None)
    return Press(query.id, InboundMessage(
        platform=PLATFORM,
        chat_id=str(chat.id),
        chat_type=chat_type,
        user_id=str(sender.id),
        text=command,
        # The question's message: a refusal quotes it, so everyone sees which question it was about.
        message_id=str(message.message_id),
        thread_id=thread_id,
        user_name=clean_text(name) if name else None,
        chat_name=clean_text(chat.title) if isinstance(chat.title, str) else None,
        dedupe_id=f"cbq:{query.id}",
        addressed=True,
        raw=update,
    ))
