"""One Slack event -> one ``InboundMessage`` (or None when it is not for us).

Read: ``message`` (plain, ``thread_broadcast``, ``file_share``) and
``app_mention`` events. Ignored: edits, deletions and every other subtype (a
turn already answered the original), messages from bots (this one included),
and anything without a channel, a sender and a ``ts``. A message's ``files``
(``_files``) come along as attachments; ``text`` is then their caption,
possibly empty.

Keys the router builds from the result:

- ``chat_type``: ``im`` -> dm (``thread_id`` = the DM thread, if written in
  one); everything else (channels, private channels, group DMs) -> channel,
  so the ``message`` and ``app_mention`` events of one post always build the
  same key; a reply inside a thread -> thread with ``thread_id`` = ``thread_ts``.
- A top-level channel message the bot answers (a mention, a free-response
  channel) is answered in a thread on that message, so it is keyed as that
  thread already: thread with ``thread_id`` = its own ``ts``. The answer and
  every follow-up in the thread share one key and one session (as in the
  original hermes). Both events of a mentioned post are addressed, so they
  still build one key.
- ``dedupe_id``: ``<channel>:<ts>``: a Slack retry, a redelivery minutes later
  and the ``message`` + ``app_mention`` pair of one post are one turn.

``addressed``: DMs, mentions, free-response channels, and threads the bot
takes part in (the caller says which).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._text import clean_text
from ..base import ChatType, InboundMessage
from ._files import attachments_of

__all__ = ["PLATFORM", "BotIdentity", "command_to_inbound", "command_well_formed", "to_inbound", "well_formed"]

PLATFORM = "slack"

#: message subtypes that are a person writing something new
_READ_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})
_TS = re.compile(r"\d{1,12}\.\d{1,9}")


@dataclass(frozen=True)
class BotIdentity:
    user_id: str
    bot_id: str | None = None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _timestamp(ts: str) -> float:
    try:
        return float(ts)
    except ValueError:  # pragma: no cover - ts is checked against _TS first
        return 0.0


def to_inbound(
    event: Any,
    me: BotIdentity,
    *,
    free_response: frozenset[str] = frozenset(),
    in_bot_thread: Callable[[str, str], bool] = lambda channel, thread: False,
) -> InboundMessage | None:
    if not isinstance(event, Mapping):
        return None
    kind = event.get("type")
    if kind not in ("message", "app_mention"):
        return None
    if kind == "message" and event.get("subtype") not in _READ_SUBTYPES:
        return None
    channel, user, ts = _str(event.get("channel")), _str(event.get("user")), _str(event.get("ts"))
    if channel is None or user is None or ts is None or not _TS.fullmatch(ts):
        return None
    if event.get("bot_id") or user == me.user_id:
        return None
    raw_text = event.get("text")
    text = clean_text(raw_text) if isinstance(raw_text, str) else ""
    mention = f"<@{me.user_id}>"
    mentioned = kind == "app_mention" or mention in text
    if mentioned:
        text = text.replace(mention, "").strip()

    thread_ts = _str(event.get("thread_ts"))
    if thread_ts is not None and (thread_ts == ts or not _TS.fullmatch(thread_ts)):
        thread_ts = None  # the parent message of a thread is not "in" the thread
    channel_type = event.get("channel_type")
    is_dm = channel_type == "im" if isinstance(channel_type, str) else channel.startswith("D")
    if is_dm:
        chat_type = ChatType.DM
    elif thread_ts is not None:
        chat_type = ChatType.THREAD
    else:
        chat_type = ChatType.CHANNEL

    addressed = (
        is_dm
        or mentioned
        or channel in free_response
        or (thread_ts is not None and (event.get("parent_user_id") == me.user_id or in_bot_thread(channel, thread_ts)))
    )
    if chat_type is ChatType.CHANNEL and addressed:
        chat_type, thread_ts = ChatType.THREAD, ts  # the conversation is the thread the answer starts
    return InboundMessage(
        platform=PLATFORM,
        chat_id=channel,
        chat_type=chat_type,
        user_id=user,
        text=text,
        message_id=ts,
        thread_id=thread_ts,
        timestamp=_timestamp(ts),
        dedupe_id=f"{channel}:{ts}",
        addressed=addressed,
        attachments=attachments_of(event),
    )


def well_formed(body: Any) -> bool:
    """Whether Bolt can take ``body`` safely: a URL check, or an event callback with a typed event.

    Bolt's matchers raise on odd shapes (a non-string event type); a raise is a 500 or a missing
    socket ack, and Slack retries those for hours. Anything else is acknowledged and dropped.
    """
    if not isinstance(body, Mapping):
        return False
    kind = body.get("type")
    if kind == "url_verification":
        return isinstance(body.get("challenge"), str)
    if kind != "event_callback":
        return False
    event = body.get("event")
    if not isinstance(event, Mapping) or not _str(event.get("type")):
        return False
    return all(body.get(k) is None or isinstance(body.get(k), str) for k in ("event_id", "team_id", "api_app_id"))


def command_to_inbound(body: Any) -> InboundMessage | None:
    """A slash command (``/sethome``, ``/handoff telegram``) as the text the router parses.

    Slack never sends a message that starts with ``/`` as a message: the app registers the
    gateway's commands as slash commands, and they arrive here. They have no ``ts``: the
    answer goes to the channel itself, and ``trigger_id`` identifies a retry.
    """
    if not isinstance(body, Mapping):
        return None
    command, channel, user = _str(body.get("command")), _str(body.get("channel_id")), _str(body.get("user_id"))
    if command is None or channel is None or user is None or not command.startswith("/"):
        return None
    args = body.get("text")
    text = clean_text(f"{command} {args}" if isinstance(args, str) and args.strip() else command).strip()
    trigger = _str(body.get("trigger_id"))
    is_dm = channel.startswith("D") or body.get("channel_name") == "directmessage"
    return InboundMessage(
        platform=PLATFORM,
        chat_id=channel,
        chat_type=ChatType.DM if is_dm else ChatType.CHANNEL,
        user_id=user,
        text=text,
        dedupe_id=f"command:{trigger}" if trigger else None,
        redeliverable=trigger is not None,
        addressed=True,
    )


def command_well_formed(body: Any) -> bool:
    return isinstance(body, Mapping) and all(
        isinstance(body.get(k), str) and body.get(k) for k in ("command", "channel_id", "user_id")
    )
