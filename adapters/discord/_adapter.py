"""The Discord adapter, on discord.py's ``Client`` (gateway websocket in, REST out).

- **Endpoints**: ``base_url``/``gateway_url`` are set on discord.py's ``Route.BASE``
  and ``DiscordWebSocket.DEFAULT_GATEWAY`` at connect. Both are process-wide in
  discord.py, hence one Discord endpoint per process. ``gateway_url`` is used
  for every IDENTIFY; a RESUME goes to the ``resume_gateway_url`` Discord sent
  in READY (discord.py's rule, which Discord requires), so it bypasses a
  gateway proxy configured here.
- **Fatal failures** (``FatalAdapterError``, never a reconnect loop): a token
  Discord refuses (401 at login, close 4004), close 4014 (the privileged
  Message Content Intent is not enabled in the Developer Portal), and the other
  close codes discord.py cannot recover from (4010-4013).
- **Reconnects** are discord.py's: op 7, a dropped socket or a silent one →
  RESUME (Discord replays what was missed); op 9 → a new IDENTIFY after
  ``identify_delay``. At every disconnect the adapter freezes, per recently
  active channel (``catchup_channels``), the newest message it had seen there.
  As soon as the gateway is back (READY's ``connect`` event or RESUMED, not
  ``on_ready``, which waits ``guild_ready_timeout``) it reads over REST what
  was posted after that frozen anchor (``after=``, at most ``catchup_limit``
  per channel). Messages that arrive live in such a channel meanwhile are held
  and delivered after the read-back, so they neither move the anchor nor
  overtake what was missed. A message that arrives both ways has one
  ``dedupe_id``, so the router gives it one turn.
- **Liveness watchdog**: discord.py's keep-alive handler records when the
  last heartbeat ACK came (read from ``client.ws``, no per-frame hook; debug
  events stay off, they cost a task per gateway frame). No ACK for
  ``degraded_after_missed_acks`` heartbeat intervals → ``health`` is
  "degraded"; for ``reconnect_after_missed_acks`` intervals → the adapter
  drops the zombie connection, and discord.py resumes. discord.py's own check
  only fires when *nothing* arrives (``heartbeat_timeout``), which misses a
  gateway that still sends events but no ACKs.
- **Outbound**: chunks of 2000 characters (``split``); the first chunk of an
  answer references the user's message; 429s are waited out by discord.py
  (``retry_after``, up to ``max_ratelimit_wait``) and the same chunk is sent
  again, so chunks arrive once and in order. A longer wait fails the send
  with an ``AdapterError``. No mass mentions are ever pinged.

``health`` is "starting", "live", "degraded" (reconnecting, or no ACKs) or
"failed" (fatal); ``health_reason`` says why when it is not "live".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from typing import Any

import discord
import structlog
import yarl
from discord.gateway import DiscordWebSocket

from ..base import (
    Adapter,
    AdapterError,
    ChatInfo,
    ChatType,
    FatalAdapterError,
    InboundMessage,
    OutboundMessage,
    SendKind,
    SendResult,
)
from ..settings import reveal
from ._inbound import PLATFORM, ChannelRef, classify_channel, thread_name, to_inbound
from ._settings import DiscordSettings

__all__ = ["DiscordAdapter"]

log = structlog.get_logger("hermes.discord")

PORTAL = "https://discord.com/developers/applications"
INTENT_MESSAGE = (
    "Discord closed the connection with code 4014: the bot asks for the privileged Message Content Intent, "
    "which is not enabled for this application. Enable 'Message Content Intent' under Bot -> Privileged "
    f"Gateway Intents in the Discord Developer Portal ({PORTAL}), then restart the gateway."
)
TOKEN_MESSAGE = (
    "Discord rejected the bot token ({detail}). Check DISCORD_BOT_TOKEN (Developer Portal -> your application "
    "-> Bot -> Reset Token) and platforms.discord.base_url."
)
#: close codes discord.py does not recover from, and what to tell the operator
_FATAL_CLOSES = {
    4004: TOKEN_MESSAGE.format(detail="gateway close code 4004"),
    4010: "Discord closed the connection with 4010 (invalid shard).",
    4011: "Discord closed the connection with 4011: this bot is in too many guilds to run without sharding.",
    4012: "Discord closed the connection with 4012 (invalid API version); upgrade discord.py.",
    4013: "Discord closed the connection with 4013 (invalid intents).",
    4014: INTENT_MESSAGE,
}
STOP_WAIT = 5.0
PENDING_THREADS_MAX = 1000
#: channels read back at once after a reconnect, and how long one read may take before its live
#: messages are released anyway (a long 429 on the history would hold them up to max_ratelimit_wait)
CATCHUP_PARALLEL = 4
CATCHUP_READ_TIMEOUT = 30.0
_UNKNOWN_CHANNEL = 10003
_THREAD_EXISTS = 160004


def _guard_parsers(client: discord.Client) -> None:
    """Make one malformed gateway event a logged drop instead of a dead connection.

    discord.py parses each dispatch inside its receive loop; a payload it cannot read (a missing
    key, a wrong type) raises out of ``Client.connect`` and takes the whole connection down.
    ``parsers`` is discord.py's event -> parser table (on the private ``_connection``).
    """
    parsers: dict[str, Any] | None = getattr(getattr(client, "_connection", None), "parsers", None)
    if not isinstance(parsers, dict):  # pragma: no cover - a discord.py without the table: unguarded
        log.warning("discord.parsers_unguarded")
        return
    for event, parse in list(parsers.items()):
        if event in ("READY", "RESUMED"):
            continue  # without these the session is unusable: let discord.py fail and reconnect

        def guarded(data: Any, parse: Any = parse, event: str = event) -> None:
            try:
                parse(data)
            except Exception as exc:
                ident = data.get("id") if isinstance(data, dict) else None
                log.warning("discord.event_malformed", gateway_event=event, id=str(ident)[:32],
                            error=type(exc).__name__)

        parsers[event] = guarded


class _NoVoiceNoise(logging.Filter):
    """discord.py warns at every start that voice libraries are missing; this gateway has no voice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "voice will NOT be supported" not in record.getMessage()


logging.getLogger("discord.client").addFilter(_NoVoiceNoise())


class _Client(discord.Client):
    """discord.py's client with its events routed to the adapter."""

    def __init__(self, adapter: DiscordAdapter, **options: Any) -> None:
        super().__init__(**options)
        self._adapter = adapter

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        # discord.py sleeps 5 s before every re-IDENTIFY; the pause is a setting here.
        if not initial and self._adapter.settings.identify_delay > 0:
            await asyncio.sleep(self._adapter.settings.identify_delay)

    async def on_connect(self) -> None:
        # Dispatched by discord.py when it parses READY (a new session), before the guilds arrive.
        self._adapter._on_connect()

    async def on_ready(self) -> None:
        await self._adapter._on_ready()

    async def on_resumed(self) -> None:
        await self._adapter._on_resumed()

    async def on_disconnect(self) -> None:
        self._adapter._on_disconnect()

    async def on_message(self, message: discord.Message) -> None:
        self._adapter._take(message)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        log.exception("discord.event_failed", event=event_method)


class DiscordAdapter(Adapter):
    platform = PLATFORM
    max_message_length = 2000
    supports_recovery = True
    threads_are_chats = True

    def __init__(self, settings: DiscordSettings) -> None:
        super().__init__()
        self.settings = settings
        #: "starting" | "live" | "degraded" | "failed" (read by /readyz)
        self.health = "starting"
        self.health_reason: str | None = "connecting"
        self._client: _Client | None = None
        self._stopping = False
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
        #: prospective thread id (= the message id) -> (parent channel id, thread name)
        self._pending_threads: dict[str, tuple[str, str]] = {}
        self._thread_locks: dict[str, asyncio.Lock] = {}
        #: target channel -> the user message its last answer referenced (only the first chunk refers)
        self._referenced: dict[str, str] = {}
        #: the watchdog declared the ACKs missing; the last ACK time (perf_counter) it saw then
        self._ack_silent = False
        self._silent_mark = 0.0
        self._readies = 0
        #: observability for tests and /status
        self.catchup_runs = 0
        self.forced_reconnects = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def bot_username(self) -> str | None:
        user = self._client.user if self._client is not None else None
        return user.name if user is not None else None

    def _set_health(self, health: str, reason: str | None) -> None:
        if (health, reason) != (self.health, self.health_reason):
            self.health, self.health_reason = health, reason
            log.info("discord.health", health=health, reason=reason)

    def _make_client(self) -> _Client:
        s = self.settings
        # Both are read by discord.py each time it builds a request or connects.
        discord.http.Route.BASE = s.base_url.rstrip("/")
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(s.gateway_url)
        intents = discord.Intents.default()
        intents.message_content = True
        intents.presences = False
        intents.members = False
        client = _Client(
            self,
            intents=intents,
            guild_ready_timeout=s.guild_ready_timeout,
            heartbeat_timeout=s.heartbeat_timeout,
            chunk_guilds_at_startup=False,
            max_ratelimit_timeout=s.max_ratelimit_wait,
            allowed_mentions=discord.AllowedMentions(everyone=False, roles=False, users=True, replied_user=True),
        )
        _guard_parsers(client)
        return client

    async def connect(self) -> None:
        self._stopping = False
        self._set_health("starting", "connecting")
        client = self._make_client()
        self._client = client
        watchdog = asyncio.create_task(self._watchdog(client), name="discord:watchdog")
        try:
            await client.start(reveal(self.settings.token), reconnect=True)
        except discord.LoginFailure:
            raise self._fatal(TOKEN_MESSAGE.format(detail="401 Unauthorized at login")) from None
        except discord.PrivilegedIntentsRequired:
            raise self._fatal(INTENT_MESSAGE) from None
        except discord.ConnectionClosed as exc:
            message = _FATAL_CLOSES.get(exc.code or 0)
            if message is not None:
                raise self._fatal(message) from None
            self._set_health("degraded", f"gateway closed with {exc.code}")
            raise AdapterError(f"the Discord gateway closed the connection with code {exc.code}") from None
        except discord.HTTPException as exc:
            self._set_health("degraded", f"REST error {exc.status}")
            raise AdapterError(f"Discord answered {exc.status} during start-up ({exc.text or 'no detail'})") from None
        except Exception as exc:
            self._set_health("degraded", f"connection failed: {type(exc).__name__}")
            raise
        finally:
            watchdog.cancel()
            with contextlib.suppress(Exception):
                await client.close()
        if not self._stopping:
            self._set_health("degraded", "gateway connection ended")

    def _fatal(self, message: str) -> FatalAdapterError:
        self._set_health("failed", message)
        log.error("discord.fatal", reason=message)
        return FatalAdapterError(message)

    async def disconnect(self) -> None:
        self._stopping = True
        self.ready.clear()
        client = self._client
        if client is not None and not client.is_closed():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), STOP_WAIT)
        for task in list(self._background):  # catch-ups: the next connection runs its own
            task.cancel()
        tails = [t for t in self._tails.values() if not t.done()]
        if tails:
            await asyncio.wait(tails, timeout=STOP_WAIT)
        if self.health != "failed":
            self._set_health("degraded", "stopped")

    # ------------------------------------------------------------------ gateway events

    def _on_connect(self) -> None:
        # READY was parsed: a new session (after an invalid one, or a restart of the adapter), in
        # which Discord replays nothing. Read back at once: on_ready comes guild_ready_timeout later.
        self._request_catch_up("ready")

    async def _on_ready(self) -> None:
        self._readies += 1
        self._connected_again()
        if not self.ready.is_set():
            self.ready.set()
            log.info("discord.connected", bot=self.bot_username, guilds=len(self._client.guilds if self._client else ()))

    async def _on_resumed(self) -> None:
        self._connected_again()
        log.info("discord.resumed")
        self._request_catch_up("resumed")

    def _connected_again(self) -> None:
        if self._ack_silent:
            # Only an ACK proves the gateway answers again.
            self._set_health("degraded", "reconnected, but the gateway still acknowledges no heartbeats")
        else:
            self._set_health("live", None)

    def _on_disconnect(self) -> None:
        self._freeze_anchors()
        if self._stopping or self.health == "failed":
            return
        self._set_health("degraded", "gateway connection lost; reconnecting")

    @staticmethod
    def _keep_alive(client: _Client) -> Any:
        """discord.py's heartbeat thread of the current connection (None between connections).

        Its ``_last_ack`` (``time.perf_counter()``) is set when the connection says HELLO and at
        every HEARTBEAT_ACK; ``latency`` stays infinite until the first ACK of that connection.
        """
        ws = getattr(client, "ws", None)
        return getattr(ws, "_keep_alive", None) if ws is not None else None

    async def _watchdog(self, client: _Client) -> None:
        s = self.settings
        forced_for: float | None = None
        while not client.is_closed():
            keep_alive = self._keep_alive(client)
            interval = getattr(keep_alive, "interval", None)
            await asyncio.sleep(min(interval / 4, 1.0) if isinstance(interval, int | float) and interval > 0 else 0.5)
            keep_alive = self._keep_alive(client)
            interval = getattr(keep_alive, "interval", None)
            last_ack = getattr(keep_alive, "_last_ack", None)
            latency = getattr(keep_alive, "latency", math.inf)
            if not isinstance(interval, int | float) or interval <= 0 or not isinstance(last_ack, float):
                continue  # between connections (or a discord.py without these: its own check remains)
            if self._ack_silent:
                # An ACK on this connection, newer than the silence: the gateway answers again.
                if isinstance(latency, float) and math.isfinite(latency) and last_ack > self._silent_mark:
                    self._ack_silent = False
                    log.info("discord.heartbeat_recovered")
                    if self.health == "degraded" and self.ready.is_set():
                        self._set_health("live", None)
            if not self.ready.is_set():
                continue
            silent = time.perf_counter() - last_ack
            if silent > interval * s.degraded_after_missed_acks and not self._ack_silent:
                self._ack_silent, self._silent_mark = True, last_ack
                reason = f"no heartbeat ACK from the Discord gateway for {silent:.1f}s"
                log.warning("discord.heartbeat_missed", silent_s=round(silent, 2), interval_s=interval)
                self._set_health("degraded", reason)
            if silent > interval * s.reconnect_after_missed_acks and forced_for != last_ack:
                forced_for = last_ack
                ws = client.ws
                if ws is not None:
                    self.forced_reconnects += 1
                    log.warning("discord.zombie_reconnect", silent_s=round(silent, 2))
                    # As discord.py's own zombie check does: close with 4000, which it resumes from.
                    with contextlib.suppress(Exception):
                        await ws.close(4000)

    # ------------------------------------------------------------------ inbound

    def _me(self) -> tuple[int, str] | None:
        user = self._client.user if self._client is not None else None
        return (user.id, user.display_name or user.name) if user is not None else None

    def _take(self, message: discord.Message, ref: ChannelRef | None = None, *, live: bool = True) -> None:
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
            s = self.settings
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
            self._pending_threads.setdefault(inbound.thread_id, (inbound.chat_id, classified.new_thread_name))
            while len(self._pending_threads) > PENDING_THREADS_MAX:
                # Never answered (refused, a duplicate): forget the oldest; a late answer still
                # opens its thread through the "unknown channel" path in send().
                self._pending_threads.pop(next(iter(self._pending_threads)))
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
        while len(self._active) > self.settings.catchup_channels:
            self._active.popitem(last=False)

    async def _deliver(self, previous: asyncio.Task[None] | None, inbound: InboundMessage) -> None:
        if previous is not None:
            with contextlib.suppress(BaseException):
                await previous
        try:
            await self.dispatch(inbound)
        except Exception:
            log.exception("discord.dispatch_failed", message_id=inbound.message_id)

    def _freeze_anchors(self) -> None:
        """At a disconnect: what each active channel's catch-up will read after (an anchor that is
        still pending from an earlier disconnect is older, so it stays)."""
        self._disconnects += 1
        for cid, entry in self._active.items():
            self._anchors.setdefault(cid, entry)

    def _request_catch_up(self, why: str) -> None:
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
        client = self._client
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
        self, client: _Client, cid: int, ref: ChannelRef, anchor: int, disconnects: int, slots: asyncio.Semaphore
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
            self._take(message, ref, live=False)
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
                    self._take(message, mref, live=False)
        return len(missed)

    async def _read_after(self, client: _Client, cid: int, anchor: int) -> list[discord.Message]:
        channel = client.get_channel(cid) or client.get_partial_messageable(cid)
        if not isinstance(channel, discord.abc.Messageable):
            return []
        return [
            message
            async for message in channel.history(
                limit=self.settings.catchup_limit, after=discord.Object(id=anchor), oldest_first=True
            )
        ]

    # ------------------------------------------------------------------ outbound

    def _require_client(self) -> _Client:
        client = self._client
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
            raise self._send_error(exc) from None
        except discord.RateLimited as exc:
            raise self._rate_limit_error(exc, "send the message") from None
        if message.reply_to and message.kind is not SendKind.ACK:
            # An interim "queued" ack does not count: the answer that follows refers to the question too.
            self._referenced[target] = message.reply_to
        return SendResult((str(sent.id),))

    @staticmethod
    def _send_error(exc: discord.HTTPException) -> AdapterError:
        return AdapterError(f"Discord refused the message ({exc.status}, code {exc.code}: {exc.text or 'no detail'})")

    def _rate_limit_error(self, exc: discord.RateLimited, what: str) -> AdapterError:
        """discord.py raises ``RateLimited`` (not an ``HTTPException``) for a 429 longer than we may wait."""
        return AdapterError(
            f"Discord rate limit: could not {what}, Discord asks to wait {exc.retry_after:.0f}s, longer than "
            f"platforms.discord.max_ratelimit_wait ({self.settings.max_ratelimit_wait:g}s)"
        )

    async def _open_pending_thread(self, client: _Client, thread_id: str) -> None:
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
        client = self._client
        if client is None or client.is_closed():
            return
        # A thread that is not open yet shows typing in its channel.
        target = chat_id if thread_id is None or thread_id in self._pending_threads else thread_id
        with contextlib.suppress(discord.HTTPException):
            await client.http.send_typing(int(target))

    async def _channel(self, client: _Client, chat_id: str) -> Any:
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

    async def create_thread(self, chat_id: str, name: str, *, from_message_id: str | None = None) -> str | None:
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
