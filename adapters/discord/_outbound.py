"""Everything the Discord adapter sends: replies, typing, threads.

Chunks of 2000 characters (``DiscordAdapter.split``); the first chunk of an
answer references the user's message; 429s are waited out by discord.py
(``retry_after``, up to ``max_ratelimit_wait``) and the same chunk is sent
again, so chunks arrive once and in order. A longer wait fails the send with an
``AdapterError``. An answer to a message that asked for a thread of its own
(``auto_thread``) opens that thread first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import discord
import structlog

from ..base import AdapterError, ChatInfo, ChatType, OutboundMessage, SendKind, SendResult
from ._client import DiscordClient
from ._inbound import classify_channel, thread_name
from ._settings import DiscordSettings

__all__ = ["Sender"]

log = structlog.get_logger("hermes.discord")

PENDING_THREADS_MAX = 1000
_UNKNOWN_CHANNEL = 10003
_THREAD_EXISTS = 160004


def _send_error(exc: discord.HTTPException) -> AdapterError:
    return AdapterError(f"Discord refused the message ({exc.status}, code {exc.code}: {exc.text or 'no detail'})")


class Sender:
    def __init__(self, settings: DiscordSettings, client: Callable[[], DiscordClient | None]) -> None:
        """``client()`` is the current connection's client."""
        self._settings = settings
        self._client = client
        #: prospective thread id (= the message id) -> (parent channel id, thread name)
        self._pending_threads: dict[str, tuple[str, str]] = {}
        self._thread_locks: dict[str, asyncio.Lock] = {}
        #: target channel -> the user message its last answer referenced (only the first chunk refers)
        self._referenced: dict[str, str] = {}

    def expect_thread(self, thread_id: str, channel_id: str, name: str) -> None:
        """The answer to message ``thread_id`` in ``channel_id`` goes into a new thread named ``name``,
        opened when the answer is sent."""
        self._pending_threads.setdefault(thread_id, (channel_id, name))
        while len(self._pending_threads) > PENDING_THREADS_MAX:
            # Never answered (refused, a duplicate): forget the oldest; a late answer still
            # opens its thread through the "unknown channel" path in send().
            self._pending_threads.pop(next(iter(self._pending_threads)))

    def _require_client(self) -> DiscordClient:
        client = self._client()
        if client is None or client.is_closed():
            raise AdapterError("the Discord adapter is not connected")
        return client

    async def send(self, message: OutboundMessage) -> SendResult:
        client = self._require_client()
        if not message.text:
            return SendResult()
        target = message.thread_id or message.chat_id
        if message.thread_id is not None and message.thread_id in self._pending_threads:
            await self._open_pending_thread(client, message.thread_id)
        reference = None
        # Only the first chunk refers to the question; in a thread started from the question
        # (auto_thread) it is the thread's first message already.
        if message.reply_to and message.reply_to != message.thread_id and self._referenced.get(target) != message.reply_to:
            reference = discord.MessageReference(
                message_id=int(message.reply_to), channel_id=int(target), fail_if_not_exists=False
            )
        try:
            try:
                channel = client.get_partial_messageable(int(target))
                if reference is not None:
                    sent = await channel.send(message.text, reference=reference)
                else:
                    sent = await channel.send(message.text)
            except discord.NotFound as exc:
                if exc.code != _UNKNOWN_CHANNEL or message.thread_id is None or message.thread_id != message.reply_to:
                    raise
                # A prospective thread this process did not see (a reply recovered after a restart): open it.
                self._pending_threads.setdefault(message.thread_id, (message.chat_id, "Conversation"))
                await self._open_pending_thread(client, message.thread_id)
                sent = await client.get_partial_messageable(int(target)).send(message.text)
        except discord.HTTPException as exc:
            raise _send_error(exc) from None
        except discord.RateLimited as exc:
            raise self._rate_limit_error(exc, "send the message") from None
        if message.reply_to and message.kind is not SendKind.ACK:
            # An interim "queued" ack does not count: the answer that follows refers to the question too.
            self._referenced[target] = message.reply_to
        return SendResult((str(sent.id),))

    async def place(self, message: OutboundMessage, *, missing: bool = False) -> tuple[DiscordClient, str]:
        """The client and the channel id ``message`` goes to, its thread opened first when it is one still to
        open. ``missing``: Discord answered "unknown channel" for that thread, a prospective thread of a reply
        recovered after a restart (this process never saw it asked for): it is opened now."""
        client = self._require_client()
        thread = message.thread_id
        if missing and thread is not None and thread == message.reply_to:
            self._pending_threads.setdefault(thread, (message.chat_id, "Conversation"))
        if thread is not None and thread in self._pending_threads:
            await self._open_pending_thread(client, thread)
        return client, thread or message.chat_id

    def references(self, message: OutboundMessage) -> bool:
        """Whether the next message to ``message``'s place should reply to ``reply_to``: not when the answer's
        text already did, nor in the thread started from that message (its first message is the question)."""
        target = message.thread_id or message.chat_id
        return bool(message.reply_to) and message.reply_to != message.thread_id and (
            self._referenced.get(target) != message.reply_to)

    def _rate_limit_error(self, exc: discord.RateLimited, what: str) -> AdapterError:
        """discord.py raises ``RateLimited`` (not an ``HTTPException``) for a 429 longer than we may wait."""
        return AdapterError(
            f"Discord rate limit: could not {what}, Discord asks to wait {exc.retry_after:.0f}s, longer than "
            f"platforms.discord.max_ratelimit_wait ({self._settings.max_ratelimit_wait:g}s)"
        )

    async def _open_pending_thread(self, client: DiscordClient, thread_id: str) -> None:
        lock = self._thread_locks.setdefault(thread_id, asyncio.Lock())
        async with lock:
            pending = self._pending_threads.get(thread_id)
            if pending is None:
                return
            parent, name = pending
            try:
                await client.http.start_thread_with_message(
                    int(parent), int(thread_id), name=name, auto_archive_duration=1440, rate_limit_per_user=None
                )
                log.info("discord.thread_opened", channel_id=parent, thread_id=thread_id)
            except discord.HTTPException as exc:
                if exc.code != _THREAD_EXISTS:
                    raise AdapterError(
                        f"could not open a thread for the answer ({exc.status}, code {exc.code}: {exc.text})"
                    ) from None
            except discord.RateLimited as exc:
                raise self._rate_limit_error(exc, "open a thread for the answer") from None
            self._pending_threads.pop(thread_id, None)
            self._thread_locks.pop(thread_id, None)

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        client = self._client()
        if client is None or client.is_closed():
            return
        # A thread that is not open yet shows typing in its channel.
        target = chat_id if thread_id is None or thread_id in self._pending_threads else thread_id
        with contextlib.suppress(discord.HTTPException):
            await client.http.send_typing(int(target))

    async def _channel(self, client: DiscordClient, chat_id: str) -> Any:
        channel = client.get_channel(int(chat_id))
        if channel is None:
            try:
                channel = await client.fetch_channel(int(chat_id))
            except discord.HTTPException as exc:
                raise AdapterError(f"Discord channel {chat_id} is not reachable ({exc.status}: {exc.text})") from None
        return channel

    async def get_chat_info(self, chat_id: str) -> ChatInfo:
        channel = await self._channel(self._require_client(), chat_id)
        ref = classify_channel(channel)
        kind = ref.chat_type if ref is not None else ChatType.CHANNEL
        name = getattr(channel, "name", None)
        return ChatInfo(chat_id=chat_id, chat_type=kind, name=name if isinstance(name, str) else None)

    async def create_thread(self, chat_id: str, name: str, from_message_id: str | None) -> str | None:
        """A public thread in ``chat_id`` (from a message if given); its id. None in a DM (no threads)."""
        client = self._require_client()
        title = thread_name(name)
        channel = await self._channel(client, chat_id)
        try:
            if isinstance(channel, discord.Thread):
                return str(channel.id)
            if isinstance(channel, discord.TextChannel):
                if from_message_id is not None:
                    thread = await channel.get_partial_message(int(from_message_id)).create_thread(
                        name=title, auto_archive_duration=1440
                    )
                else:
                    thread = await channel.create_thread(
                        name=title, type=discord.ChannelType.public_thread, auto_archive_duration=1440
                    )
                return str(thread.id)
            if isinstance(channel, discord.ForumChannel):
                made = await channel.create_thread(name=title, content=title, auto_archive_duration=1440)
                return str(made.thread.id)
        except discord.HTTPException as exc:
            raise AdapterError(f"Discord could not create the thread ({exc.status}, code {exc.code}: {exc.text})") from None
        except discord.RateLimited as exc:
            raise self._rate_limit_error(exc, "create the thread") from None
        return None
