"""Everything the Slack adapter sends: replies, "thinking" placeholders, thread seeds.

Markdown -> mrkdwn, split to 4000 characters (of the converted text) by
``SlackAdapter.split``, in the message's ``thread_id``: in a channel that is the
thread of the message answered (a top-level message the bot answers is keyed as
the thread it starts, see ``_inbound``); in a DM the answer stays where the user
wrote (top level, or the DM thread). 429 waits out Retry-After (the SDK's
rate-limit retry handler). While the agent works, a "thinking" placeholder is
posted in that thread and the answer is edited into it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from .._text import clean_text
from ..base import AdapterError, ChatInfo, ChatType, InboundMessage, OutboundMessage, SendKind, SendResult
from ._bounded import Bounded, BoundedMap
from ._mrkdwn import to_mrkdwn
from ._settings import SlackSettings
from ._webapi import api_error

__all__ = ["Sender"]

log = structlog.get_logger("hermes.slack")

THREAD_TITLE_MAX = 150


class Sender:
    def __init__(self, settings: SlackSettings, client: Callable[[], AsyncWebClient | None]) -> None:
        """``client()`` is the bot's Web API client (None before the first connect)."""
        self._settings = settings
        self._client = client
        self._bot_threads = Bounded()
        self._replied = Bounded()
        self._authors = BoundedMap()
        #: (channel, ts answered) -> (task posting the placeholder, set once its post has started)
        self._placeholders: dict[tuple[str, str], tuple[asyncio.Task[str | None], asyncio.Event]] = {}
        #: placeholder posts under way
        self.background: set[asyncio.Task[Any]] = set()

    def in_bot_thread(self, channel: str, thread_ts: str) -> bool:
        """The bot has posted in this thread (so a message there is for it)."""
        return (channel, thread_ts) in self._bot_threads

    def _require_client(self) -> AsyncWebClient:
        client = self._client()
        if client is None:
            raise AdapterError("the Slack adapter is not connected")
        return client

    # ------------------------------------------------------------ placeholders

    def start_placeholder(self, message: InboundMessage) -> None:
        """A turn will answer ``message``: post a placeholder if the answer is slow to come."""
        ts = message.message_id
        if ts is None:
            return
        key = (message.chat_id, ts)
        if key in self._replied or key in self._placeholders:
            return  # the answer beat us to it
        posting = asyncio.Event()
        task = asyncio.create_task(self._post_placeholder(message.chat_id, message.thread_id, posting))
        self._placeholders[key] = (task, posting)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def cancel_unposted(self) -> None:
        """At a disconnect: placeholders still waiting out ``thinking_delay`` are never posted."""
        for task, posting in self._placeholders.values():
            if not posting.is_set():
                task.cancel()

    async def _post_placeholder(self, channel: str, thread_ts: str | None, posting: asyncio.Event) -> str | None:
        # Only a slow answer gets one: a quick one would cost a second message (and Slack's
        # per-channel message rate) for a placeholder nobody had time to read.
        if self._settings.thinking_delay > 0:
            await asyncio.sleep(self._settings.thinking_delay)
        posting.set()
        try:
            resp = await self._require_client().chat_postMessage(
                channel=channel, text=self._settings.thinking_text, thread_ts=thread_ts
            )
        except Exception as exc:
            log.debug("slack.placeholder_failed", chat_id=channel, error=type(exc).__name__)
            return None
        ts = resp.get("ts")
        return ts if isinstance(ts, str) else None

    async def _take_placeholder(self, channel: str, reply_to: str) -> str | None:
        entry = self._placeholders.pop((channel, reply_to), None)
        if entry is None:
            return None
        task, posting = entry
        if not posting.is_set():
            task.cancel()  # still waiting out thinking_delay: nothing was posted
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(task), self._settings.request_timeout)
        except Exception:
            return None

    async def claim(self, message: OutboundMessage) -> str | None:
        """The answer to ``message.reply_to`` goes out now (sent, or its stream shows text): no placeholder
        is posted for it any more, and the one already posted (its ts) is the answer's to use."""
        if message.thread_id:
            # Before the call: a user's follow-up can arrive before Slack's answer to it does.
            self._bot_threads.add((message.chat_id, message.thread_id))
        if not message.reply_to or message.kind is SendKind.ACK:
            return None
        self._replied.add((message.chat_id, message.reply_to))
        return await self._take_placeholder(message.chat_id, message.reply_to)

    # ------------------------------------------------------------------ authors

    def note_author(self, message: InboundMessage) -> None:
        """Who wrote ``message``: a streamed answer to it names that person as its recipient."""
        if message.message_id is not None and message.user_id is not None:
            self._authors.put((message.chat_id, message.message_id), message.user_id)

    def author_of(self, channel: str, ts: str | None) -> str | None:
        found = self._authors.get((channel, ts)) if ts is not None else None
        return found if isinstance(found, str) else None

    # ------------------------------------------------------------------ sends

    async def send(self, message: OutboundMessage) -> SendResult:
        text = clean_text(message.text)
        if not text.strip():
            return SendResult()  # Slack refuses empty messages; nothing visible is lost
        client = self._require_client()
        channel = message.chat_id
        # Where the message answered was: its thread in a channel (a top-level one carries its own ts as
        # thread_id), the DM itself or the DM thread it was written in.
        thread_ts = message.thread_id
        placeholder = await self.claim(message)
        body = to_mrkdwn(text)
        try:
            if placeholder is not None:
                try:
                    await client.chat_update(channel=channel, ts=placeholder, text=body)
                    ts: Any = placeholder
                except SlackApiError as exc:
                    # The placeholder was deleted meanwhile: post the answer as a new message.
                    log.warning("slack.placeholder_lost", chat_id=channel, error=api_error(exc))
                    placeholder = None
            if placeholder is None:
                resp = await client.chat_postMessage(channel=channel, text=body, thread_ts=thread_ts)
                ts = resp.get("ts")
        except SlackApiError as exc:
            raise AdapterError(f"Slack refused the message ({api_error(exc)})") from None
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            raise AdapterError(f"Slack send failed ({type(exc).__name__})") from None
        return SendResult((str(ts),) if isinstance(ts, str) else ())

    async def get_chat_info(self, chat_id: str) -> ChatInfo:
        client = self._require_client()
        try:
            resp = await client.conversations_info(channel=chat_id)
        except SlackApiError as exc:
            raise AdapterError(f"Slack channel {chat_id} is not reachable: {api_error(exc)}") from None
        channel = resp.get("channel") or {}
        kind = ChatType.DM if channel.get("is_im") else ChatType.CHANNEL
        name = channel.get("name") if isinstance(channel.get("name"), str) else None
        return ChatInfo(chat_id=chat_id, chat_type=kind, name=name)

    async def create_thread(self, chat_id: str, name: str, from_message_id: str | None) -> str:
        """A seed message titled ``name``; its ts is the thread. Under ``from_message_id`` when given."""
        client = self._require_client()
        title = " ".join(clean_text(name).split())[:THREAD_TITLE_MAX] or "Conversation"
        seed = f"🧵 *{to_mrkdwn(title).replace('*', '')}*"
        try:
            resp = await client.chat_postMessage(channel=chat_id, text=seed, thread_ts=from_message_id)
        except SlackApiError as exc:
            raise AdapterError(f"Slack could not open a thread in {chat_id}: {api_error(exc)}") from None
        thread = from_message_id or resp.get("ts")
        if not isinstance(thread, str):
            raise AdapterError("Slack chat.postMessage answered without a ts")
        self._bot_threads.add((chat_id, thread))
        log.info("slack.thread_created", chat_id=chat_id, thread_id=thread)
        return thread
