"""Who and where an interaction came from (a button press, a select, a slash command), read from
its raw payload the same way for every kind, into the router's ``InboundMessage``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import discord
import structlog
from discord.http import Route

from .._text import clean_text
from ..base import ChatType, InboundMessage
from ._inbound import PLATFORM, ChannelRef, classify_channel

__all__ = ["answerable", "cached_place", "interaction_message", "mapping", "respond", "snowflake"]

log = structlog.get_logger("hermes.discord")

#: announcement, public and private threads
THREAD_TYPES = frozenset({10, 11, 12})
DM, GROUP_DM = 1, 3


def snowflake(value: Any) -> str | None:
    text = str(value) if isinstance(value, int | str) and not isinstance(value, bool) else ""
    return text if text.isascii() and text.isdigit() and len(text) <= 20 else None


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def cached_place(client: discord.Client, data: Mapping[str, Any]) -> ChannelRef | None:
    """Where the interaction's channel sits by discord.py's cache, needed only when the payload does not say."""
    if mapping(data.get("channel")).get("type") is not None:
        return None
    channel_id = snowflake(data.get("channel_id"))
    return classify_channel(client.get_channel(int(channel_id))) if channel_id is not None else None


def interaction_message(data: Mapping[str, Any], cached: ChannelRef | None, *, text: str,
                        message_id: str | None) -> InboundMessage | None:
    """The interaction as a message of ``text`` from the person who made it, in its chat; None when
    the payload does not say who or where, or it came from a group DM (the gateway serves none).
    ``cached``: where the channel sits by discord.py's cache, for a payload whose ``channel`` has no type."""
    interaction_id = snowflake(data.get("id"))
    member = mapping(data.get("member"))
    user = mapping(member.get("user")) or mapping(data.get("user"))
    user_id = snowflake(user.get("id"))
    channel = mapping(data.get("channel"))
    channel_id = snowflake(data.get("channel_id")) or snowflake(channel.get("id"))
    if interaction_id is None or user_id is None or channel_id is None:
        return None
    kind = channel.get("type")
    if kind == GROUP_DM:
        return None
    parent = snowflake(channel.get("parent_id"))
    thread_id: str | None = None
    channel_name = channel.get("name")
    if kind is None and cached is not None:
        chat_type, chat_id, thread_id, channel_name = cached.chat_type, cached.chat_id, cached.thread_id, cached.name
    elif kind in THREAD_TYPES and parent is not None:
        chat_type, chat_id, thread_id = ChatType.THREAD, parent, channel_id
    elif kind == DM or data.get("guild_id") is None:
        chat_type, chat_id = ChatType.DM, channel_id
    else:
        chat_type, chat_id = ChatType.CHANNEL, channel_id
    name = user.get("global_name") or user.get("username")
    return InboundMessage(
        platform=PLATFORM, chat_id=chat_id, chat_type=chat_type, user_id=user_id, text=text,
        message_id=message_id, thread_id=thread_id,
        user_name=clean_text(name) if isinstance(name, str) else None,
        chat_name=clean_text(channel_name) if isinstance(channel_name, str) else None,
        dedupe_id=f"interaction:{interaction_id}", addressed=True,
    )


def answerable(data: Any, kind: int, client: discord.Client | None) -> tuple[str, str] | None:
    """(id, token) of an ``INTERACTION_CREATE`` payload of ``kind`` this adapter answers; None for
    another kind (not ours to answer) or one that cannot be answered (logged)."""
    if not isinstance(data, Mapping) or data.get("type") != kind:
        return None
    interaction_id, token = snowflake(data.get("id")), data.get("token")
    if interaction_id is None or not isinstance(token, str) or not token or client is None:
        log.warning("discord.interaction_malformed", id=str(data.get("id"))[:32])
        return None
    return interaction_id, token


async def respond(client: discord.Client, interaction_id: str, token: str, body: Mapping[str, Any]) -> bool:
    """The interaction's one callback (Discord wants it within 3 s); False when it was refused.

    Refused means already answered (a RESUME replay) or too late: what the person did happened
    all the same, and the router's dedupe knows a replay, so the caller goes on."""
    route = Route("POST", "/interactions/{interaction_id}/{interaction_token}/callback",
                  interaction_id=int(interaction_id), interaction_token=token)
    try:
        await client.http.request(route, json=body)
    except (discord.HTTPException, discord.RateLimited) as exc:
        log.warning("discord.interaction_ack_failed", interaction_id=interaction_id,
                    status=getattr(exc, "status", None), code=getattr(exc, "code", None))
        return False
    except Exception as exc:
        log.warning("discord.interaction_ack_failed", interaction_id=interaction_id, error=type(exc).__name__)
        return False
    return True
