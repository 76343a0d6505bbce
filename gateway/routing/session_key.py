"""Session keys: which conversation an inbound message belongs to.

A key is a pure function of the message and config (DESIGN invariant 4), so the
same chat always lands in the same session and a restart changes nothing. The
format is the reference's (``sessions.md``; inventory §2)::

    agent:main:<platform>:dm:<chat_id>[:<thread_id>]
    agent:main:<platform>:<group|channel>:<chat_id>[:<thread_id>][:<user_id>]

A thread is keyed as the reference's table documents a "group thread/topic"
on every platform, ``group:<chat_id>:<thread_id>``: a Discord or Slack thread
(``ChatType.THREAD``, with its parent channel as the chat) and a Telegram
topic alike. Files written before keyed Discord and Slack threads as
``thread:<chat>:<thread>``; storage's gateway migration 4 renames them.

Every id segment is escaped (``%`` -> ``%25``, ``:`` -> ``%3A``) so an id that
contains ``:`` cannot pose as two segments and borrow someone else's session.

Known limit, inherited from the reference format: with the default flags a
shared thread key (``group:<chat>:<thread>``) and a per-user key
(``group:<chat>:<user>``) have the same shape, so a thread id equal to a
member's user id in the same chat would collide. Discord ids are global
snowflakes and Telegram topic ids are small message ids, so this is not
reachable in practice; with ``thread_sessions_per_user`` every key is unique.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.base import ChatType, InboundMessage

__all__ = ["SessionKeySettings", "build_session_key", "is_shared_session"]


@dataclass(frozen=True)
class SessionKeySettings:
    # ``agent:<profile>``; kept verbatim (its ``:`` is part of the format).
    namespace: str = "agent:main"
    # Each participant of a group or channel gets their own session.
    group_sessions_per_user: bool = True
    # ...and inside threads/topics too (threads are shared by default).
    thread_sessions_per_user: bool = False


def build_session_key(message: InboundMessage, settings: SessionKeySettings) -> str:
    """The session key for ``message``; only platform, chat, thread and user matter."""
    # Empty strings count as absent, as in the reference (it tests truthiness).
    chat_id = message.chat_id or None
    thread_id = message.thread_id or None
    user_id = message.user_id or None
    chat_type = ChatType(message.chat_type)  # an unknown type is a bug upstream: fail loudly
    prefix = f"{settings.namespace}:{_escape(message.platform)}:{_key_type(chat_type)}"

    if chat_type == ChatType.DM:
        # The person is the chat: never append the user. Without a chat id the
        # sender stands in for it, then the thread; only a DM with no
        # identifier at all falls into the per-platform sink.
        owner = chat_id or user_id
        if owner is None:
            return prefix if thread_id is None else f"{prefix}:{_escape(thread_id)}"
        return _join(prefix, owner, thread_id)

    # A THREAD chat is a thread in itself, so it follows the thread rule even
    # when the adapter reports no separate thread id.
    in_thread = thread_id is not None or chat_type == ChatType.THREAD
    isolate_user = settings.group_sessions_per_user and (not in_thread or settings.thread_sessions_per_user)
    # The chat segment is always present (empty if the adapter gave none) so a
    # thread or user id can never slide into the chat id's position.
    segments = [chat_id or ""]
    if thread_id is not None:
        segments.append(thread_id)
    if isolate_user:
        if user_id is not None:
            segments.append(user_id)
        elif thread_id is not None:
            # No participant: the thread is shared. The empty user segment keeps
            # <chat>:<thread>: apart from the per-user key <chat>:<user> of a
            # member whose id happens to equal the thread id.
            segments.append("")
    return _join(prefix, *segments)


def is_shared_session(message: InboundMessage, settings: SessionKeySettings) -> bool:
    """Whether several people may talk in this message's session (its key has no user)."""
    if ChatType(message.chat_type) == ChatType.DM:
        return False
    in_thread = bool(message.thread_id) or message.chat_type == ChatType.THREAD
    isolate_user = settings.group_sessions_per_user and (not in_thread or settings.thread_sessions_per_user)
    return not (isolate_user and message.user_id)


def _key_type(chat_type: ChatType) -> str:
    # The reference has no ``thread`` chat type in its keys: a thread is a group's.
    return ChatType.GROUP.value if chat_type == ChatType.THREAD else chat_type.value


def _join(prefix: str, *segments: str | None) -> str:
    return ":".join([prefix, *(_escape(s) for s in segments if s is not None)])


def _escape(segment: str) -> str:
    # '%' first, so an id that already looks escaped stays distinguishable.
    return segment.replace("%", "%25").replace(":", "%3A")
