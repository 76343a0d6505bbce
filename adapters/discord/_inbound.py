"""One discord.py ``Message`` -> one ``InboundMessage`` (or None when it is not for us).

Ignored, by design: messages from bots (this one included) and webhooks, and
system messages (joins, pins, thread starters); only ``default`` and ``reply``
messages are read. A message's files (``_media``) come along as attachments;
with them ``text`` is the caption, possibly empty, and they are addressed by
the same rules as text.

Keys the router builds from the result (never built here):

- DM channel -> ``dm`` with the DM channel id.
- Guild text channel -> ``channel`` with the channel id (per user by default).
- Thread -> ``thread`` with the parent channel as ``chat_id`` and the thread as
  ``thread_id`` (shared by its participants by default).
- ``dedupe_id`` is ``message:<id>``: snowflakes are global, so the same message
  seen twice (a RESUME replay and the REST catch-up) is one turn.

``addressed`` is true in DMs, with ``require_mention`` off, in a free-response
channel (or a thread under one), in a thread the bot started, and when the
message mentions the bot or replies to one of its messages.

With ``auto_thread``, a mention in a channel is keyed as a *prospective* thread
whose id is the message id: a thread started from a message has that message's
id on Discord. The adapter opens it when the first answer is sent, so a message
the router refuses never opens a thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import discord

from .._text import clean_text
from ..base import ChatType, InboundMessage
from ._media import attachments_of

__all__ = ["PLATFORM", "ChannelRef", "Classified", "classify_channel", "thread_name", "to_inbound"]

PLATFORM = "discord"
THREAD_NAME_MAX = 100

_READ_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})


@dataclass(frozen=True)
class ChannelRef:
    """Where a channel sits, as the router's keys need it."""

    chat_type: ChatType
    chat_id: str
    thread_id: str | None = None
    name: str | None = None
    #: the thread's creator (a thread the bot started needs no mention)
    owner_id: int | None = None


@dataclass(frozen=True)
class Classified:
    message: InboundMessage
    #: set when the message starts a prospective thread (``auto_thread``): its name
    new_thread_name: str | None = None


def classify_channel(channel: object) -> ChannelRef | None:
    """The key parts of a channel, or None for channels the gateway does not serve (group DMs)."""
    name = getattr(channel, "name", None)
    name = clean_text(name) if isinstance(name, str) else None
    if isinstance(channel, discord.DMChannel):
        return ChannelRef(ChatType.DM, str(channel.id))
    if isinstance(channel, discord.Thread):
        return ChannelRef(ChatType.THREAD, str(channel.parent_id), str(channel.id), name, channel.owner_id)
    if isinstance(channel, discord.GroupChannel):
        return None
    if isinstance(channel, discord.PartialMessageable):
        # Uncached: only whether it is in a guild is known.
        kind = ChatType.DM if channel.guild_id is None else ChatType.CHANNEL
        return ChannelRef(kind, str(channel.id))
    if isinstance(channel, discord.abc.GuildChannel):
        return ChannelRef(ChatType.CHANNEL, str(channel.id), None, name)
    return None


def _mention_re(me_id: int) -> re.Pattern[str]:
    return re.compile(rf"<@!?{me_id}>")


def _mentions_me(message: discord.Message, me_id: int, text: str) -> bool:
    if any(getattr(user, "id", None) == me_id for user in message.mentions or ()):
        return True
    return _mention_re(me_id).search(text) is not None


def _replies_to_me(message: discord.Message, me_id: int) -> bool:
    ref = message.reference
    resolved = ref.resolved if ref is not None else None
    author = getattr(resolved, "author", None)
    return author is not None and getattr(author, "id", None) == me_id


def _strip_mentions(text: str, me_id: int, me_name: str) -> str:
    """"<@bot> what now?" -> "what now?" (so "<@bot> /status" is a command); others become "@name"."""
    pattern = _mention_re(me_id)
    m = re.match(rf"\s*{pattern.pattern}[\s,:]*", text)
    if m is not None and m.end() < len(text):
        text = text[m.end() :]
    return pattern.sub(f"@{me_name}", text)


def thread_name(text: str) -> str:
    """A thread title from the first line of a message (Discord allows 1-100 characters)."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) > THREAD_NAME_MAX:
        first = first[: THREAD_NAME_MAX - 1].rstrip() + "…"
    return first or "Conversation"


def to_inbound(
    message: discord.Message,
    *,
    me_id: int,
    me_name: str,
    require_mention: bool,
    free_response_channels: frozenset[str],
    auto_thread: bool,
    ref: ChannelRef | None = None,
) -> Classified | None:
    """The message for the router, or None if it is not for us. ``ref`` overrides the channel's place
    (messages read back over REST may carry an uncached channel)."""
    author = message.author
    if author is None or getattr(author, "bot", True) or author.id == me_id or message.webhook_id is not None:
        return None
    if message.type not in _READ_TYPES:
        return None
    where = ref or classify_channel(message.channel)
    if where is None:
        return None
    content = message.content
    if not isinstance(content, str):
        return None
    text = clean_text(content)
    if where.chat_type is ChatType.DM:
        addressed = True
    else:
        free = where.chat_id in free_response_channels or (
            where.thread_id is not None and where.thread_id in free_response_channels
        )
        mentioned = _mentions_me(message, me_id, text) or _replies_to_me(message, me_id)
        addressed = (
            not require_mention or free or mentioned or (where.thread_id is not None and where.owner_id == me_id)
        )
        text = _strip_mentions(text, me_id, me_name)
    chat_type, thread_id, new_thread = where.chat_type, where.thread_id, None
    if auto_thread and chat_type is ChatType.CHANNEL and addressed and where.chat_id not in free_response_channels:
        # Discord gives a thread started from a message the message's id: key the thread now.
        chat_type, thread_id, new_thread = ChatType.THREAD, str(message.id), thread_name(text)
    reply_to = None
    if message.reference is not None and message.reference.message_id is not None:
        reply_to = str(message.reference.message_id)
    display = getattr(author, "display_name", None) or getattr(author, "name", None)
    inbound = InboundMessage(
        platform=PLATFORM,
        chat_id=where.chat_id,
        chat_type=chat_type,
        user_id=str(author.id),
        text=text,
        message_id=str(message.id),
        thread_id=thread_id,
        user_name=clean_text(display) if isinstance(display, str) else None,
        chat_name=where.name,
        timestamp=message.created_at.timestamp(),
        reply_to=reply_to,
        dedupe_id=f"message:{message.id}",
        addressed=addressed,
        attachments=attachments_of(message),
        raw=message,
    )
    return Classified(inbound, new_thread)
