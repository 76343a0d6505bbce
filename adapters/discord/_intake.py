"""Discord messages to the router, in order per chat, and the read-back of what a disconnect missed.

Reconnects are discord.py's: op 7, a dropped socket or a silent one -> RESUME
(Discord replays what was missed); op 9 -> a new IDENTIFY. At every disconnect
this intake freezes, per recently active channel (``catchup_channels``), the
newest message it had seen there. As soon as the gateway is back (READY's
``connect`` event or RESUMED, not ``on_ready``, which waits
``guild_ready_timeout``) it reads over REST what was posted after that frozen
anchor (``after=``, at most ``catchup_limit`` per channel). Messages that arrive
live in such a channel meanwhile are held and delivered after the read-back, so
they neither move the anchor nor overtake what was missed. A message that
arrives both ways has one ``dedupe_id``, so the router gives it one turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import discord
import structlog

from ..base import InboundMessage, MessageHandler
from ._client import DiscordClient
from ._inbound import ChannelRef, classify_channel, to_inbound
from ._settings import DiscordSettings

__all__ = ["MessageIntake"]

log = structlog.get_logger("hermes.discord")

#: channels read back at once after a reconnect, and how long one read may take before its live
#: messages are released anyway (a long 429 on the history would hold them up to max_ratelimit_wait)
CATCHUP_PARALLEL = 4
CATCHUP_READ_TIMEOUT = 30.0


class MessageIntake:
    def __init__(self, settings: DiscordSettings, client: Callable[[], DiscordClient | None],
                 dispatch: MessageHandler, expect_thread: Callable[[str, str, str], None]) -> None:
        """``client()`` is the current connection's client; ``expect_thread(thread_id, channel_id,
        name)`` announces a thread that the answer to a message will open (``auto_thread``)."""
        self._settings = settings
        self._client = client
        self._dispatch = dispatch
        self._expect_thread = expect_thread
        #: channel id -> (where it sits, newest user message id seen there), most recent last
        self._active: OrderedDict[int, tuple[ChannelRef, int]] = OrderedDict()
        #: channel id -> (where it sits, newest message seen before a disconnect): what the next
        #: catch-up reads after. Frozen at the disconnect; live messages never move it.
        self._anchors: dict[int, tuple[ChannelRef, int]] = {}
        #: live messages of channels with an anchor, held until that channel's catch-up is done
        self._held: dict[int, list[tuple[discord.Message, ChannelRef | None]]] = {}
        #: disconnects so far (a catch-up that saw one while it ran keeps its anchors)
        self._disconnects = 0
        self._catchup_task: asyncio.Task[None] | None = None
        self._catchup_wanted: str | None = None
        self._tails: dict[str, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        #: observability for tests and /status
        self.catchup_runs = 0

    async def stop(self, bound: float) -> None:
        """Cancel the read-backs (the next connection runs its own) and let queued messages reach
        the router, for at most ``bound`` seconds."""
        for task in list(self._background):
            task.cancel()
        tails = [t for t in self._tails.values() if not t.done()]
        if tails:
            await asyncio.wait(tails, timeout=bound)

    def _me(self) -> tuple[int, str] | None:
        client = self._client()
        user = client.user if client is not None else None
        return (user.id, user.display_name or user.name) if user is not None else None

    def take(self, message: discord.Message, ref: ChannelRef | None = None, *, live: bool = True) -> None:
        """Map one message and queue it for the router behind earlier ones of its chat.

        A live message in a channel whose catch-up is pending waits for it (``_held``)."""
        me = self._me()
        if me is None:
            return
        channel = getattr(message, "channel", None)
        cid = getattr(channel, "id", None)
        if ref is None and isinstance(channel, discord.PartialMessageable):
            # Before GUILD_CREATE (right after a new session) the channel is not cached yet; where a
            # channel we answered in sits (a thread, not a channel) is known already.
            known = self._anchors.get(channel.id) or self._active.get(channel.id)
            ref = known[0] if known is not None else None
        if live and cid in self._anchors:
            self._held.setdefault(cid, []).append((message, ref))
            return
        try:
            s = self._settings
            classified = to_inbound(
                message,
                me_id=me[0],
                me_name=me[1],
                require_mention=s.require_mention,
                free_response_channels=s.free_response_channels,
                auto_thread=s.auto_thread,
                ref=ref,
            )
            self._remember(message, ref, engaged=classified is not None and classified.message.addressed)
        except Exception as exc:  # a payload discord.py accepted but we cannot read: drop it, say so
            log.warning("discord.message_malformed", message_id=getattr(message, "id", None),
                        error=type(exc).__name__)
            return
        if classified is None:
            return
        inbound = classified.message
        if classified.new_thread_name is not None and inbound.thread_id is not None:
            self._expect_thread(inbound.thread_id, inbound.chat_id, classified.new_thread_name)
        key = inbound.thread_id or inbound.chat_id
        previous = self._tails.get(key)
        task = asyncio.create_task(self._deliver(previous, inbound), name=f"discord:dispatch:{key}")
        self._tails[key] = task

        def forget(done: asyncio.Task[None], key: str = key) -> None:
            if self._tails.get(key) is done:
                del self._tails[key]

        task.add_done_callback(forget)

    def _remember(self, message: discord.Message, ref: ChannelRef | None, *, engaged: bool) -> None:
        """Track the newest user message per active channel (one where a message was for the bot),
        for the catch-up after a reconnect."""
        author = message.author
        if author is None or getattr(author, "bot", True):
            return
        cid = int(message.channel.id)
        known = self._active.get(cid)
        if known is None and not engaged:
            return
        where = ref or classify_channel(message.channel)
        if where is None:
            return
        newest = max(known[1], message.id) if known is not None else message.id
        self._active[cid] = (known[0] if known is not None else where, newest)
        self._active.move_to_end(cid)
        while len(self._active) > self._settings.catchup_channels:
            self._active.popitem(last=False)

    async def _deliver(self, previous: asyncio.Task[None] | None, inbound: InboundMessage) -> None:
        if previous is not None:
            with contextlib.suppress(BaseException):
                await previous
        try:
            await self._dispatch(inbound)
        except Exception:
            log.exception("discord.dispatch_failed", message_id=inbound.message_id)

    def freeze_anchors(self) -> None:
        """At a disconnect: what each active channel's catch-up will read after (an anchor that is
        still pending from an earlier disconnect is older, so it stays)."""
        self._disconnects += 1
        for cid, entry in self._active.items():
            self._anchors.setdefault(cid, entry)

    def request_catch_up(self, why: str) -> None:
        """The gateway is back: read back what the last disconnect missed (if anything is frozen)."""
        if not self._anchors:
            return
        self._catchup_wanted = why
        if self._catchup_task is None or self._catchup_task.done():
            self._catchup_task = asyncio.create_task(self._catch_up_loop(), name="discord:catch-up")
            self._background.add(self._catchup_task)
            self._catchup_task.add_done_callback(self._background.discard)

    async def _catch_up_loop(self) -> None:
        # One read-back at a time; a reconnect during one asks for another pass after it.
        while self._catchup_wanted is not None and self._anchors:
            why, self._catchup_wanted = self._catchup_wanted, None
            await self._catch_up(why)

    async def _catch_up(self, why: str) -> None:
        """Read back what was posted while the gateway was away, in the channels we were active in."""
        client = self._client()
        if client is None:
            return
        self.catchup_runs += 1
        disconnects = self._disconnects
        anchors = list(self._anchors.items())
        slots = asyncio.Semaphore(CATCHUP_PARALLEL)
        counts = await asyncio.gather(
            *(self._catch_up_channel(client, cid, ref, anchor, disconnects, slots) for cid, (ref, anchor) in anchors)
        )
        log.info("discord.caught_up", after=why, channels=len(anchors), messages=sum(counts))

    async def _catch_up_channel(
        self, client: DiscordClient, cid: int, ref: ChannelRef, anchor: int, disconnects: int,
        slots: asyncio.Semaphore,
    ) -> int:
        missed: list[discord.Message] = []
        complete = False
        try:
            async with slots:
                missed = await asyncio.wait_for(self._read_after(client, cid, anchor), CATCHUP_READ_TIMEOUT)
            complete = True
        except discord.HTTPException as exc:
            log.warning("discord.catchup_failed", channel_id=cid, status=exc.status, code=exc.code)
        except Exception as exc:  # a timeout, RateLimited: a failed read must not hold the channel
            log.warning("discord.catchup_failed", channel_id=cid, error=type(exc).__name__)
        for message in missed:
            self.take(message, ref, live=False)
        taken = {m.id for m in missed}
        if self._anchors.get(cid) == (ref, anchor):
            if complete and self._disconnects != disconnects:
                # Gone again while reading: the next pass reads on from what this one got.
                if taken:
                    self._anchors[cid] = (ref, max(taken))
            else:
                # Done, or failed (live messages must not wait for a read that does not work).
                del self._anchors[cid]
        if cid not in self._anchors:
            for message, mref in self._held.pop(cid, []):
                if message.id not in taken:
                    self.take(message, mref, live=False)
        return len(missed)

    async def _read_after(self, client: DiscordClient, cid: int, anchor: int) -> list[discord.Message]:
        channel = client.get_channel(cid) or client.get_partial_messageable(cid)
        if not isinstance(channel, discord.abc.Messageable):
            return []
        return [
            message
            async for message in channel.history(
                limit=self._settings.catchup_limit, after=discord.Object(id=anchor), oldest_first=True
            )
        ]
