"""Telegram's reply streams: a draft in private chats, a message edited in place elsewhere.

In a private chat the answer grows in a draft (``sendMessageDraft``, Bot API 9.3): an
animated, ephemeral preview with no message behind it, so ``message_ids`` stays empty
until ``finish`` sends the answer exactly as an unstreamed reply goes out
(``Sender.send``: MarkdownV2 with the plain fallback, split by ``TelegramAdapter.split``).
A draft holds one message: it shows the *last* chunk of the text as that split cuts it,
the part being written now, which is also the message that will end the answer. (The
first 4096 units would freeze the preview once an answer outgrows one message, while
the person waits for the rest.)

Elsewhere (groups, channels, a private chat's thread, whose "thread" is a seed message a
draft cannot reply under) an ``EditingStream``: the answer is posted as plain text,
edited as it grows, continued in a new message past 4096 units (split like a reply, so
the final MarkdownV2 fits the same messages), and the final edit carries MarkdownV2,
plain where Telegram refuses the markup. A bot whose drafts Telegram refuses
(``TEXTDRAFT_PEER_INVALID``: a Bot API server older than 9.3) streams by editing in
private chats too, from the first refusal on.

Every call goes through ``Sender.stream_call``: under the chat's send lock, and a 429
comes back as ``RateLimitedError`` for the gateway (or ``finish``) to wait out.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Sequence

import structlog
from telegram.constants import ParseMode
from telegram.error import BadRequest, TelegramError

from .._stream import EditingStream
from .._text import clean_text
from ..base import AdapterError, OutboundMessage, ReplyStream, SendResult
from ._client import TelegramBot
from ._format import to_markdown_v2
from ._outbound import Sender, chat_ref, is_parse_error

__all__ = ["Streams"]

log = structlog.get_logger("hermes.telegram")

Split = Callable[[str], list[str]]

#: What a blank chunk shows (Telegram refuses a message of whitespace only).
_BLANK = "…"


def _visible(text: str) -> str:
    text = clean_text(text)
    return text if text.strip() else _BLANK


def _failed(what: str, exc: TelegramError) -> AdapterError:
    return AdapterError(f"Telegram refused {what}: {exc.message}")


class Streams:
    """Opens the adapter's reply streams; remembers whether Telegram takes drafts from this bot."""

    def __init__(self, sender: Sender, split: Split) -> None:
        self.sender = sender
        self.split = split
        #: Telegram answered a draft with TEXTDRAFT_PEER_INVALID: private chats stream by editing too
        self.drafts_refused = False

    def open(self, target: OutboundMessage) -> ReplyStream:
        chat = chat_ref(target.chat_id)
        if isinstance(chat, int) and chat > 0 and target.thread_id is None and not self.drafts_refused:
            return _Drafted(self, target, chat)
        return self.editing(target)

    def editing(self, target: OutboundMessage, message_ids: Sequence[str] = ()) -> ReplyStream:
        return _Edited(self.sender, target, self.split, message_ids)

    def refuse_drafts(self, reason: str) -> None:
        if not self.drafts_refused:
            log.warning("telegram.drafts_refused", reason=reason)
        self.drafts_refused = True


class _Drafted(ReplyStream):
    """A private chat: drafts while the model writes, the answer sent as messages at the end."""

    #: the answer is a new message (the draft goes with it): no edit to pace
    finish_edits = False

    def __init__(self, streams: Streams, target: OutboundMessage, chat: int) -> None:
        self._streams = streams
        self._sender = streams.sender
        self._split = streams.split
        self._target = target
        self._chat = chat
        # Non-zero, and new for every answer: drafts with one id animate into each other.
        self._draft_id = secrets.randbelow(2**31 - 2) + 1
        self._shown: str | None = None
        self._ids: tuple[str, ...] = ()
        self._editing: ReplyStream | None = None

    @property
    def message_ids(self) -> tuple[str, ...]:
        return self._editing.message_ids if self._editing is not None else self._ids

    async def update(self, text: str) -> None:
        if self._editing is not None:
            return await self._editing.update(text)
        chunks = self._split(clean_text(text))
        if not chunks or not chunks[-1].strip() or chunks[-1] == self._shown:
            return
        tail = chunks[-1]
        draft_id = self._draft_id

        async def draft(bot: TelegramBot) -> None:
            await bot.send_message_draft(self._chat, draft_id, tail)

        try:
            await self._sender.stream_call(self._target.chat_id, draft, idempotent=True)
        except BadRequest as exc:
            if "textdraft_peer_invalid" not in exc.message.lower():
                raise _failed("a draft", exc) from None
            self._streams.refuse_drafts(exc.message)
            self._editing = self._streams.editing(self._target)
            return await self._editing.update(text)
        except TelegramError as exc:
            raise _failed("a draft", exc) from None
        self._shown = tail

    async def finish(self, message: OutboundMessage) -> SendResult:
        if self._editing is not None:
            return await self._editing.finish(message)
        ids: list[str] = []
        try:
            for chunk in self._split(message.text) if message.text else []:
                ids.extend((await self._sender.send(dataclasses.replace(message, text=chunk))).message_ids)
        except TelegramError as exc:
            raise _failed("the answer", exc) from None
        self._ids = tuple(ids)
        return SendResult(self._ids)


class _Edited(EditingStream):
    """A message posted, then edited as the answer grows (groups, channels, threads)."""

    def __init__(self, sender: Sender, target: OutboundMessage, split: Split, message_ids: Sequence[str]) -> None:
        super().__init__(split, message_ids)
        self._sender = sender
        self._target = target
        self._chat = chat_ref(target.chat_id)

    async def finish(self, message: OutboundMessage) -> SendResult:
        if message.text.strip():
            return await super().finish(message)
        # Nothing to show (as ``Sender.send`` sends nothing): what the stream showed goes.
        while self._ids:
            await self._patiently(self._drop_last)
        return SendResult()

    async def _post(self, text: str, *, final: bool) -> str:
        text = _visible(text)
        try:
            if final:  # as a reply: MarkdownV2, plain if refused, waiting out floods
                sent = await self._sender.send(dataclasses.replace(self._target, text=text))
                return sent.message_ids[0]
            target = self._target

            async def post(bot: TelegramBot) -> int:
                return await self._sender.post_live(bot, target, text)

            return str(await self._sender.stream_call(target.chat_id, post, idempotent=False))
        except TelegramError as exc:
            raise _failed("a message", exc) from None

    async def _edit(self, message_id: str, text: str, *, final: bool) -> None:
        text = _visible(text)
        try:
            mid = int(message_id)
        except ValueError:
            raise AdapterError(f"not a Telegram message id: {message_id!r}") from None
        if final:
            try:
                return await self._edit_once(mid, to_markdown_v2(text), ParseMode.MARKDOWN_V2)
            except BadRequest as exc:
                if not is_parse_error(exc):
                    raise _failed("an edit", exc) from None
                log.warning("telegram.markdown_rejected", chat_id=self._target.chat_id, error=exc.message)
        await self._edit_once(mid, text, None)

    async def _edit_once(self, message_id: int, body: str, parse_mode: str | None) -> None:
        """One editMessageText; "message is not modified" means it shows ``body`` already."""

        async def edit(bot: TelegramBot) -> None:
            await bot.edit_raw_message_text(self._chat, message_id, body, parse_mode=parse_mode)

        try:
            await self._sender.stream_call(self._target.chat_id, edit, idempotent=True)
        except BadRequest as exc:
            if "message is not modified" in exc.message.lower():
                return
            if parse_mode is not None and is_parse_error(exc):
                raise  # the caller tries plain text
            raise _failed("an edit", exc) from None
        except TelegramError as exc:
            raise _failed("an edit", exc) from None

    async def _delete(self, message_id: str) -> None:
        chat, mid = self._chat, int(message_id)

        async def delete(bot: TelegramBot) -> None:
            await bot.delete_message(chat, mid)

        try:
            await self._sender.stream_call(self._target.chat_id, delete, idempotent=True)
        except TelegramError:
            await super()._delete(message_id)  # too old to delete, say: an ellipsis then

