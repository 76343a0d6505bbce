"""Everything the Telegram adapter sends: replies, typing, topics and seed messages.

Replies are split by ``TelegramAdapter.split`` to 4096 UTF-16 units *of the
escaped MarkdownV2 text* (an additive upper bound, see ``_format``), sent as
MarkdownV2, and sent again as plain text if Telegram cannot parse them. One
delivery per chat at a time (a per-chat lock): a 429 waits out ``retry_after``
holding only that chat's lock, so other chats go on, and the chunk is then sent
again (Telegram did not apply it, so this cannot duplicate). A send that times
out is not repeated: it may have arrived, and a duplicate is worse than the
ledger's "failed". A reply stream's calls (``stream_call``) take the same lock
and keep to the same flood wait, but never wait themselves: a 429 is the
stream driver's to wait out.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import structlog
from telegram import ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from .._text import clean_text
from ..base import AdapterError, ChatInfo, ChatType, OutboundMessage, RateLimitedError, SendKind, SendResult
from ._client import BotConnection, TelegramBot, retry_seconds
from ._format import expandable_quote, to_markdown_v2
from ._settings import TelegramSettings

__all__ = ["Sender", "chat_ref", "is_parse_error"]

#: what a reasoning message (/reasoning on) is headed with, above its folded quote
REASONING_HEADING = "💭 Reasoning"

log = structlog.get_logger("hermes.telegram")

T = TypeVar("T")

#: Connect retries for a send whose connection was never made (so it cannot have arrived).
CONNECT_RETRIES = 3
#: A stream call that failed on the network is tried again after this long (seconds).
STREAM_NETWORK_BACKOFF = 1.0
#: A flood wait this close to its end is over (a timer may wake a little early).
FLOOD_SLACK = 0.05
TOPIC_NAME_MAX = 128


@dataclass
class _Target:
    """Where one send goes; adjusted when Telegram says part of it is gone."""

    chat: int | str
    thread: int | None = None
    reply: ReplyParameters | None = None


def chat_ref(chat_id: str) -> int | str:
    """Telegram chat ids are integers; ``@channelname`` stays a string."""
    try:
        return int(chat_id)
    except ValueError:
        return chat_id


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def is_parse_error(exc: BadRequest) -> bool:
    text = exc.message.lower()
    return "can't parse" in text or "entit" in text or "can't find end" in text


def _never_sent(exc: NetworkError) -> bool:
    """The request provably never left: a failed connect, or a client closed by a reconnect."""
    # Our request layer (``_request``) names aiohttp's connect failures; PTB's own message says
    # "is not initialized" for a client closed by a reconnect.
    text = exc.message
    return any(s in text for s in ("aiohttp.ClientConnector", "aiohttp.ConnectionTimeoutError", "is not initialized"))


class _ChatLocks:
    """One lock per chat, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, chat_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(chat_id, (asyncio.Lock(), 0))
        self._locks[chat_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[chat_id]
            if users <= 1:
                del self._locks[chat_id]
            else:
                self._locks[chat_id] = (lock, users - 1)


class Sender:
    def __init__(self, settings: TelegramSettings, connection: BotConnection) -> None:
        self._settings = settings
        self._connection = connection
        self._send_locks = _ChatLocks()
        self._sends = 0
        self._sends_idle = asyncio.Event()
        self._sends_idle.set()
        self._flood_until: dict[str, float] = {}
        self._forum: dict[str, bool] = {}
        self._last_quote: dict[str, str | None] = {}

    def note_forum(self, chat_id: str, is_forum: bool) -> None:
        """What an inbound message told us: whether its chat has topics."""
        self._forum[chat_id] = is_forum

    async def wait_idle(self, bound: float) -> None:
        """Wait (at most ``bound`` seconds) for the sends in flight to finish."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._sends_idle.wait(), bound)

    async def send(self, message: OutboundMessage) -> SendResult:
        text = clean_text(message.text)
        if not text.strip():
            return SendResult()  # Telegram refuses empty messages; nothing visible is lost
        with self._sending():
            bot = await self._connection.ensure()
            async with self._send_locks.hold(message.chat_id):
                target = await self._target(bot, message.chat_id, message.thread_id, message.reply_to)
                formatted = expandable_quote(REASONING_HEADING, text) if message.kind is SendKind.REASONING else None
                sent = await self._send_text(bot, message.chat_id, target, text, formatted)
                self._last_quote[message.chat_id] = message.reply_to
        return SendResult((str(sent),))

    async def stream_call(self, chat_id: str, request: Callable[[TelegramBot], Awaitable[T]], *,
                          idempotent: bool) -> T:
        """One Bot API call of a reply stream, under the chat's lock (so it never lands inside a reply
        being sent there), and without waiting: a 429, or a flood wait the chat is in already, raises
        ``RateLimitedError`` (the stream's driver, or its ``finish``, waits). So does a network failure
        of a call that is safe to repeat (an edit, a draft, a request that never left); ``TimedOut``
        of a new message is ``AdapterError`` (it may have arrived). Telegram's refusals pass as raised."""
        with self._sending():
            bot = await self._connection.ensure()
            async with self._send_locks.hold(chat_id):
                left = self._flood_until.get(chat_id, 0.0) - time.monotonic()
                if left > FLOOD_SLACK:
                    raise RateLimitedError(f"Telegram chat {chat_id} is in a flood wait", left)
                try:
                    return await request(bot)
                except RetryAfter as exc:
                    delay = retry_seconds(exc)
                    self._flood_until[chat_id] = time.monotonic() + delay
                    log.warning("telegram.stream_flood_wait", chat_id=chat_id, retry_after=delay)
                    raise RateLimitedError(f"Telegram asked to wait {delay:g}s in chat {chat_id}", delay) from None
                except BadRequest:
                    raise  # a refusal, not the network (PTB derives it from NetworkError)
                except NetworkError as exc:  # TimedOut included
                    if idempotent or (not isinstance(exc, TimedOut) and _never_sent(exc)):
                        raise RateLimitedError(f"Telegram unreachable: {exc.message}", STREAM_NETWORK_BACKOFF) from None
                    raise AdapterError(f"Telegram did not confirm a message in chat {chat_id}: {exc.message}") from None

    async def post_live(self, bot: TelegramBot, message: OutboundMessage, text: str) -> int:
        """A stream's next message, plain, placed as ``send`` places a reply (thread, the question quoted
        once); call it inside ``stream_call``."""
        target = await self._target(bot, message.chat_id, message.thread_id, message.reply_to)
        sent = await bot.send_raw_message(target.chat, text, parse_mode=None, thread=target.thread, reply=target.reply)
        self._last_quote[message.chat_id] = message.reply_to
        return sent

    @contextlib.asynccontextmanager
    async def batch(self, chat_id: str) -> AsyncIterator[TelegramBot]:
        """Several calls that go together (an answer's files): in flight for a disconnect, under the chat's lock."""
        with self._sending():
            bot = await self._connection.ensure()
            async with self._send_locks.hold(chat_id):
                yield bot

    async def place(self, bot: TelegramBot, message: OutboundMessage) -> _Target:
        """Where the next message of ``message``'s answer goes (call ``placed`` once it went): as ``send`` places
        a reply, quoting the question once."""
        return await self._target(bot, message.chat_id, message.thread_id, message.reply_to)

    def placed(self, message: OutboundMessage) -> None:
        self._last_quote[message.chat_id] = message.reply_to

    async def call(self, chat_id: str, target: _Target, request: Callable[[_Target], Awaitable[T]]) -> T:
        """One Bot API call inside ``batch``, through flood waits and a vanished topic or reply target."""
        return await self._call(chat_id, target, request)

    @contextlib.contextmanager
    def _sending(self) -> Iterator[None]:
        """Counts sends in flight, so a disconnect lets them finish before closing the client."""
        self._sends += 1
        self._sends_idle.clear()
        try:
            yield
        finally:
            self._sends -= 1
            if self._sends == 0:
                self._sends_idle.set()

    async def _target(self, bot: TelegramBot, chat_id: str, thread_id: str | None, reply_to: str | None) -> _Target:
        chat = chat_ref(chat_id)
        target = _Target(chat)
        thread = _int_or_none(thread_id)
        if thread is not None:
            if await self._is_forum(bot, chat_id):
                target.thread = thread
            else:
                # A "thread" in a chat without topics is a seed message (create_thread): reply under it.
                target.reply = ReplyParameters(message_id=thread, allow_sending_without_reply=True)
                return target
        reply = _int_or_none(reply_to)
        private = isinstance(chat, int) and chat > 0
        # In groups the answer quotes the question (several people talk there); continuation
        # chunks of the same answer do not quote it again.
        if reply is not None and not private and self._last_quote.get(chat_id) != reply_to:
            target.reply = ReplyParameters(message_id=reply, allow_sending_without_reply=True)
        return target

    async def _send_text(self, bot: TelegramBot, chat_id: str, target: _Target, text: str,
                         markdown: str | None = None) -> int:
        """``text`` as MarkdownV2 (``markdown``, or converted from ``text``), plain if Telegram refuses it."""
        async def formatted(t: _Target) -> int:
            converted = markdown if markdown is not None else to_markdown_v2(text)
            return await bot.send_raw_message(t.chat, converted, parse_mode=ParseMode.MARKDOWN_V2,
                                              thread=t.thread, reply=t.reply)

        async def plain(t: _Target) -> int:
            return await bot.send_raw_message(t.chat, text, parse_mode=None, thread=t.thread, reply=t.reply)

        try:
            return await self._call(chat_id, target, formatted)
        except BadRequest as exc:
            if not is_parse_error(exc):
                raise
            log.warning("telegram.markdown_rejected", chat_id=chat_id, error=exc.message)
        return await self._call(chat_id, target, plain)

    async def _call(self, chat_id: str, target: _Target, request: Callable[[_Target], Awaitable[T]]) -> T:
        """One Bot API call for a chat, through flood waits and a vanished topic or reply target."""
        waited = 0.0
        connect_failures = 0
        migrated = False
        while True:
            await self._connection.ensure()  # a reconnect may have closed the client in between
            try:
                return await request(target)
            except RetryAfter as exc:
                delay = retry_seconds(exc)
                waited += delay
                if waited > self._settings.max_flood_wait:
                    log.error("telegram.flood_wait_exceeded", chat_id=chat_id, waited=waited)
                    raise
                self._flood_until[chat_id] = time.monotonic() + delay
                log.warning("telegram.flood_wait", chat_id=chat_id, retry_after=delay)
                await asyncio.sleep(delay)
            except ChatMigrated as exc:
                if migrated:
                    raise
                migrated = True
                log.warning("telegram.chat_migrated", chat_id=chat_id, new_chat_id=exc.new_chat_id)
                target.chat = exc.new_chat_id
            except BadRequest as exc:
                text = exc.message.lower()
                if target.thread is not None and "thread not found" in text:
                    log.warning("telegram.topic_gone", chat_id=chat_id, thread_id=target.thread)
                    target.thread = None
                elif target.reply is not None and "repl" in text and "not found" in text:
                    target.reply = None
                else:
                    raise
            except TimedOut:
                raise  # it may have arrived: never send twice
            except NetworkError as exc:
                if not _never_sent(exc) or connect_failures >= CONNECT_RETRIES:
                    raise
                connect_failures += 1
                await asyncio.sleep(0.5 * 2**connect_failures)

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        if self._flood_until.get(chat_id, 0.0) > time.monotonic():
            return  # a chat in flood wait gets nothing more, typing least of all
        bot = await self._connection.ensure()
        thread = _int_or_none(thread_id)
        if thread is not None and not await self._is_forum(bot, chat_id):
            thread = None
        try:
            await bot.send_chat_action(chat_ref(chat_id), ChatAction.TYPING, message_thread_id=thread)
        except RetryAfter as exc:
            self._flood_until[chat_id] = time.monotonic() + retry_seconds(exc)
        except TelegramError as exc:
            log.debug("telegram.typing_failed", chat_id=chat_id, error=exc.message)

    async def _is_forum(self, bot: TelegramBot, chat_id: str) -> bool:
        known = self._forum.get(chat_id)
        if known is not None:
            return known
        try:
            chat = await bot.get_chat(chat_ref(chat_id))
        except TelegramError as exc:
            # A thread id we did not see arrive came from create_thread or the ledger: a topic.
            log.warning("telegram.get_chat_failed", chat_id=chat_id, error=exc.message)
            return True
        forum = chat.is_forum is True
        self._forum[chat_id] = forum
        return forum

    async def get_chat_info(self, chat_id: str) -> ChatInfo:
        bot = await self._connection.ensure()
        try:
            chat = await bot.get_chat(chat_ref(chat_id))
        except (Forbidden, BadRequest) as exc:
            raise AdapterError(f"Telegram chat {chat_id} is not reachable: {exc.message}") from None
        self._forum[chat_id] = chat.is_forum is True
        kind = ChatType.DM if chat.type == "private" else ChatType.GROUP
        name = chat.title or chat.full_name or chat.username
        return ChatInfo(chat_id=chat_id, chat_type=kind, name=name)

    async def handoff_refusal(self, chat_id: str, chat_type: ChatType, thread_id: str | None) -> str | None:
        """A group without topics cannot hold a handed-off conversation of its own: its thread
        would be a seed message, and later messages there do not carry the seed's id."""
        if chat_type is not ChatType.GROUP or thread_id is not None:
            return None
        if await self._is_forum(await self._connection.ensure(), chat_id):
            return None
        return ("the Telegram home channel is a group without topics, so a handed-off session would have no "
                "place of its own there. Turn on Topics for that group (making it a forum) and send /sethome "
                "there again, or send /sethome in your private chat with the bot")

    async def create_thread(self, chat_id: str, name: str, from_message_id: str | None) -> str:
        """A forum topic where the chat is a forum; otherwise a seed message whose id threads later replies."""
        with self._sending():
            return await self._create_thread(chat_id, name, from_message_id)

    async def _create_thread(self, chat_id: str, name: str, from_message_id: str | None) -> str:
        bot = await self._connection.ensure()
        title = " ".join(clean_text(name).split())[:TOPIC_NAME_MAX] or "Conversation"
        async with self._send_locks.hold(chat_id):
            target = _Target(chat_ref(chat_id))
            if await self._is_forum(bot, chat_id):

                async def topic(t: _Target) -> int:
                    created = await bot.create_forum_topic(t.chat, title)
                    return int(created.message_thread_id)

                thread = await self._call(chat_id, target, topic)
                log.info("telegram.topic_created", chat_id=chat_id, thread_id=thread)
                return str(thread)
            reply = _int_or_none(from_message_id)
            if reply is not None:
                target.reply = ReplyParameters(message_id=reply, allow_sending_without_reply=True)

            async def seed(t: _Target) -> int:
                sent = await bot.send_message(t.chat, f"🧵 {title}", reply_parameters=t.reply)
                return int(sent.message_id)

            seed_id = await self._call(chat_id, target, seed)
            self._last_quote[chat_id] = None
            return str(seed_id)
