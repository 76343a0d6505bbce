"""One Telegram update -> one ``InboundMessage`` (or None when it is not for us).

Only ``message`` updates are read. Ignored, by design: edited messages (a turn
already answered the original; re-running it would answer twice), channel
posts, service messages without a sender, and every message from a bot,
including this bot's own.

Keys the router builds from the result:

- ``chat_type``: private -> dm; group and supergroup -> group.
- ``thread_id``: the topic id, only when the chat is a forum and the message is
  a topic message. A ``message_thread_id`` on a non-forum supergroup (replies
  carry one) must not split a chat into several sessions.
- ``user_id``: the numeric sender id as text, never a name.
- ``dedupe_id``: ``update:<update_id>``, so a redelivered update (a replay,
  a webhook retry, a restart before the offset was acknowledged) is one turn.

A message with files reports them as ``attachments`` (``_media_in``), nothing downloaded; its
caption is the ``text`` and addresses the bot the way text does. An album's parts come here one
by one; ``_albums`` makes them one message.

``addressed`` is true in private chats, when ``require_mention`` is off, or when
the message mentions the bot (@username or a text mention), replies to one of
the bot's messages (which includes every message in a forum topic the bot
opened), or starts with a command that is bare or names this bot
(``/help``, ``/help@thisbot``, not ``/help@otherbot``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from telegram import Message, MessageEntity, Update

from .._text import clean_text
from ..base import ChatType, InboundMessage, MalformedUpdateError
from ._media_in import media_of

__all__ = ["DEFAULT_DOWNLOAD_LIMIT", "PLATFORM", "BotIdentity", "to_inbound"]

PLATFORM = "telegram"
#: Telegram's own download limit for bots (the gateway sets its ``media.max_download_mb``)
DEFAULT_DOWNLOAD_LIMIT = 20 * 2**20

_CHAT_TYPES = {"private": ChatType.DM, "group": ChatType.GROUP, "supergroup": ChatType.GROUP}


@dataclass(frozen=True)
class BotIdentity:
    id: int
    username: str | None


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedUpdateError(f"{what} is not an integer")
    return value


def _str_or_none(value: object, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise MalformedUpdateError(f"{what} is not a string")
    return value


def to_inbound(update: Update, me: BotIdentity, *, require_mention: bool,
               max_download_bytes: int = DEFAULT_DOWNLOAD_LIMIT) -> InboundMessage | None:
    """The message in ``update`` for the router, or None if there is none for us.

    Files it carries become ``attachments`` (``_media_in``; a photo's size is picked within
    ``max_download_bytes``) and its caption the ``text``, read for mentions and commands as text is.

    Raises ``MalformedUpdateError`` (or whatever a broken field raises) on bad data.
    """
    update_id = _int(update.update_id, "update_id")
    msg = update.message
    if msg is None:
        return None
    sender = msg.from_user
    if sender is None or sender.is_bot is not False:
        return None
    chat = msg.chat
    chat_type = _CHAT_TYPES.get(chat.type) if isinstance(chat.type, str) else None
    if chat_type is None:
        return None
    chat_id = _int(chat.id, "chat.id")
    user_id = _int(sender.id, "from.id")
    message_id = _int(msg.message_id, "message_id")
    text = _str_or_none(msg.text, "text")
    entities = msg.entities
    if text is None:
        text = _str_or_none(msg.caption, "caption")
        entities = msg.caption_entities
    text = clean_text(text or "")
    attachments, sticker_text = media_of(msg, max_download_bytes)
    if sticker_text is not None:
        text = f"{text} {sticker_text}".strip()
    thread_id: str | None = None
    if chat.is_forum is True and msg.is_topic_message is True and msg.message_thread_id is not None:
        thread_id = str(_int(msg.message_thread_id, "message_thread_id"))
    addressed = chat_type is ChatType.DM or not require_mention
    if not addressed:
        addressed = _mentions_bot(text, entities, me) or _replies_to_bot(msg, me)
    if chat_type is ChatType.GROUP:
        text = _strip_leading_mention(text, me)
    reply = msg.reply_to_message
    first = _str_or_none(sender.first_name, "from.first_name") or ""
    last = _str_or_none(sender.last_name, "from.last_name") or ""
    name = f"{first} {last}".strip() or _str_or_none(sender.username, "from.username")
    title = _str_or_none(chat.title, "chat.title")
    return InboundMessage(
        platform=PLATFORM,
        chat_id=str(chat_id),
        chat_type=chat_type,
        user_id=str(user_id),
        text=text,
        message_id=str(message_id),
        thread_id=thread_id,
        user_name=clean_text(name) if name else None,
        chat_name=clean_text(title) if title else None,
        timestamp=msg.date.timestamp(),
        reply_to=str(_int(reply.message_id, "reply_to_message.message_id")) if reply is not None else None,
        dedupe_id=f"update:{update_id}",
        addressed=addressed,
        attachments=attachments,
        raw=update,
    )


def _entity_text(text: str, entity: MessageEntity) -> str | None:
    """The part of ``text`` an entity covers (offsets are UTF-16 code units)."""
    offset, length = entity.offset, entity.length
    if not isinstance(offset, int) or not isinstance(length, int) or offset < 0 or length < 0:
        return None
    units = text.encode("utf-16-le", "surrogatepass")
    if (offset + length) * 2 > len(units):
        return None
    return units[offset * 2 : (offset + length) * 2].decode("utf-16-le", "replace")


def _mentions_bot(text: str, entities: tuple[MessageEntity, ...] | None, me: BotIdentity) -> bool:
    handle = f"@{me.username}".lower() if me.username else None
    for entity in entities or ():
        if not isinstance(entity, MessageEntity):
            continue
        if entity.type == MessageEntity.TEXT_MENTION:
            if entity.user is not None and entity.user.id == me.id:
                return True
            continue
        if entity.type not in (MessageEntity.MENTION, MessageEntity.BOT_COMMAND):
            continue
        part = _entity_text(text, entity)
        if part is None:
            continue
        if entity.type == MessageEntity.MENTION and handle is not None and part.lower() == handle:
            return True
        if entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            _, at, target = part.partition("@")
            if not at or (handle is not None and f"@{target}".lower() == handle):
                return True
    # Telegram always sends a mention entity; a client or proxy that does not still addresses us.
    return handle is not None and re.search(rf"(?<![\w@]){re.escape(handle)}(?!\w)", text, re.IGNORECASE) is not None


def _replies_to_bot(msg: Message, me: BotIdentity) -> bool:
    reply = msg.reply_to_message
    return reply is not None and reply.from_user is not None and reply.from_user.id == me.id


def _strip_leading_mention(text: str, me: BotIdentity) -> str:
    """"@bot what now?" -> "what now?" (so "@bot /status" is a command); unchanged if nothing remains."""
    if not me.username:
        return text
    m = re.match(rf"\s*@{re.escape(me.username)}(?!\w)[\s,:]*", text, re.IGNORECASE)
    if m is None or m.end() == len(text):
        return text
    return text[m.end() :]
