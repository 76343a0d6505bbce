"""The Discord adapter, on discord.py's ``Client`` (gateway websocket in, REST out): its life.

This module connects, follows the gateway connection's events and disconnects;
the work is done by its parts:

- ``_client``: the discord.py client (endpoints, intents, guarded parsers);
- ``_watchdog``: liveness from heartbeat ACKs, and the zombie reconnect;
- ``_intake`` and ``_inbound``: messages in, and the read-back after a reconnect;
- ``_outbound``: replies, typing and threads out;
- ``_stream`` and ``_ratelimit``: an answer shown while it is written, and the rate limits it meets;
- ``_media``: a message's attachments, fetched from Discord's CDN only (``fetch``);
- ``_upload``: files out, as messages with attachments (``send_files``);
- ``_approvals``: approval questions with buttons, and their presses back as commands.

**Fatal failures** (``FatalAdapterError``, never a reconnect loop): a token
Discord refuses (401 at login, close 4004), close 4014 (the privileged Message
Content Intent is not enabled in the Developer Portal), and the other close
codes discord.py cannot recover from (4010-4013). Reconnects otherwise are
discord.py's own (RESUME, or a new IDENTIFY after ``identify_delay``).

``health`` is "starting", "live", "degraded" (reconnecting, or no ACKs) or
"failed" (fatal); ``health_reason`` says why when it is not "live".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import discord
import structlog

from .._health import Health
from .._http_fetch import HttpFetcher, allowed_origins
from ..approvals import ApprovalPrompt
from ..base import (
    Adapter,
    AdapterError,
    ChatInfo,
    FatalAdapterError,
    OutboundMessage,
    ReplyStream,
    SendResult,
)
from ..choices import ChoicePrompt
from ..commands import MENU_FOR_DISCORD, MenuCommand
from ..media import Attachment, OutboundFile
from ..settings import reveal
from ._approvals import ApprovalButtons
from ._client import ClientEvents, DiscordClient, make_client
from ._inbound import PLATFORM
from ._intake import MessageIntake
from ._media import CDN_HOSTS
from ._outbound import Sender
from ._ratelimit import RateWindows
from ._settings import DiscordSettings
from ._slash import SlashCommands
from ._stream import DiscordStream
from ._upload import FileSender
from ._watchdog import HeartbeatWatchdog

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
MIB = 1024 * 1024


class DiscordAdapter(Adapter):
    platform = PLATFORM
    max_message_length = 2000
    supports_recovery = True
    threads_are_chats = True
    #: the application's slash commands: ``adapters.commands.CommandMenu``
    menu_rules = MENU_FOR_DISCORD
    max_upload_bytes = 10 * MIB

    def __init__(self, settings: DiscordSettings) -> None:
        super().__init__()
        self.settings = settings
        self._health = Health(PLATFORM, "connecting")
        self._client: DiscordClient | None = None
        self._stopping = False
        self._events = ClientEvents(connected=self._on_connect, ready=self._on_ready, resumed=self._on_resumed,
                                    disconnected=self._on_disconnect, message=self._on_message,
                                    interaction=self._on_interaction)
        self._sender = Sender(settings, lambda: self._client)
        self._approvals = ApprovalButtons(self._sender, self.dispatch)
        self._slash = SlashCommands(self.dispatch)
        self._intake = MessageIntake(settings, lambda: self._client, self.dispatch, self._sender.expect_thread)
        self._watchdog = HeartbeatWatchdog(settings, self.ready, self._health)
        self._windows = RateWindows()
        self._files = HttpFetcher("Discord", allowed_origins(settings.base_url, *CDN_HOSTS))
        self.max_upload_bytes = int(settings.max_upload_mb * MIB)
        self._uploads = FileSender(self._sender, lambda: self.max_upload_bytes, settings.max_ratelimit_wait)

    # ------------------------------------------------------------------ state

    @property
    def health(self) -> str:
        """"starting" | "live" | "degraded" | "failed" (read by /readyz)."""
        return self._health.state

    @property
    def health_reason(self) -> str | None:
        return self._health.reason

    @property
    def bot_username(self) -> str | None:
        user = self._client.user if self._client is not None else None
        return user.name if user is not None else None

    @property
    def account_id(self) -> str | None:
        user = self._client.user if self._client is not None else None
        return str(user.id) if user is not None else None

    @property
    def catchup_runs(self) -> int:
        """Read-backs after a reconnect so far (for tests and /status)."""
        return self._intake.catchup_runs

    @property
    def forced_reconnects(self) -> int:
        """Zombie connections the watchdog dropped so far (for tests and /status)."""
        return self._watchdog.forced_reconnects

    # -------------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        self._stopping = False
        self._health.set("starting", "connecting")
        client = make_client(self.settings, self._events, self._windows.trace_config())
        self._client = client
        watchdog = asyncio.create_task(self._watchdog.run(client), name="discord:watchdog")
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
            self._health.set("degraded", f"gateway closed with {exc.code}")
            raise AdapterError(f"the Discord gateway closed the connection with code {exc.code}") from None
        except discord.HTTPException as exc:
            self._health.set("degraded", f"REST error {exc.status}")
            raise AdapterError(f"Discord answered {exc.status} during start-up ({exc.text or 'no detail'})") from None
        except Exception as exc:
            self._health.set("degraded", f"connection failed: {type(exc).__name__}")
            raise
        finally:
            watchdog.cancel()
            with contextlib.suppress(Exception):
                await client.close()
        if not self._stopping:
            self._health.set("degraded", "gateway connection ended")

    def _fatal(self, message: str) -> FatalAdapterError:
        self._health.set("failed", message)
        log.error("discord.fatal", reason=message)
        return FatalAdapterError(message)

    async def disconnect(self) -> None:
        self._stopping = True
        self.ready.clear()
        client = self._client
        if client is not None and not client.is_closed():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), STOP_WAIT)
        await self._intake.stop(STOP_WAIT)
        if pending := self._approvals.pending | self._slash.pending:
            await asyncio.wait(pending, timeout=STOP_WAIT)
        await self._files.close()
        if self.health != "failed":
            self._health.set("degraded", "stopped")

    # --------------------------------------------------------- gateway events

    def _on_connect(self) -> None:
        # READY was parsed: a new session (after an invalid one, or a restart of the adapter), in
        # which Discord replays nothing. Read back at once: on_ready comes guild_ready_timeout later.
        self._intake.request_catch_up("ready")

    async def _on_ready(self) -> None:
        self._connected_again()
        if not self.ready.is_set():
            self.ready.set()
            log.info("discord.connected", bot=self.bot_username, guilds=len(self._client.guilds if self._client else ()))

    async def _on_resumed(self) -> None:
        self._connected_again()
        log.info("discord.resumed")
        self._intake.request_catch_up("resumed")

    def _connected_again(self) -> None:
        if self._watchdog.ack_silent:
            # Only an ACK proves the gateway answers again.
            self._health.set("degraded", "reconnected, but the gateway still acknowledges no heartbeats")
        else:
            self._health.set("live", None)

    def _on_disconnect(self) -> None:
        self._intake.freeze_anchors()
        if self._stopping or self.health == "failed":
            return
        self._health.set("degraded", "gateway connection lost; reconnecting")

    def _on_message(self, message: discord.Message) -> None:
        self._intake.take(message)

    def _on_interaction(self, data: object) -> None:
        self._approvals.take(data, self._client)
        self._slash.take(data, self._client)

    async def set_command_menu(self, commands: Sequence[MenuCommand]) -> None:
        """The application's global commands (a bulk overwrite); an invocation comes back as the typed
        command (``_slash``)."""
        await self._slash.set_menu(self._client, commands)

    # ------------------------------------------------------------------ media

    async def fetch(self, attachment: Attachment, *, limit: int) -> AsyncIterator[bytes]:
        """An attachment's bytes from Discord's CDN (its signed URL, no token): only from cdn.discordapp.com,
        media.discordapp.net or ``base_url``'s own origin; a ``ref`` anywhere else is refused unfetched."""
        source = super().fetch(attachment, limit=limit) if attachment.data is not None else (
            self._files.fetch(attachment, limit=limit))
        async for chunk in source:
            yield chunk

    async def send_files(self, target: OutboundMessage, files: tuple[OutboundFile, ...], *,
                         sent: Callable[[int], Awaitable[None]] | None = None) -> SendResult:
        """``files`` as messages with attachments (up to 10 a message, within ``max_upload_bytes`` together) in
        ``target``'s channel or thread; each message carries a nonce Discord dedupes a retry by (``_upload``)."""
        return await self._uploads.send(target, files, sent=sent)

    # ----------------------------------------------------------------- output

    async def send(self, message: OutboundMessage) -> SendResult:
        return await self._sender.send(message)

    async def send_approval(self, target: OutboundMessage, prompt: ApprovalPrompt) -> str | None:
        """The question in ``target``'s channel or thread with three buttons (success, secondary, danger;
        ``custom_id`` = ``approval_data``); the question message's id. A press comes back as the typed
        command from the presser (``_approvals``)."""
        return await self._approvals.send(target, prompt)

    async def send_choices(self, target: OutboundMessage, prompt: ChoicePrompt) -> str | None:
        """A menu (/model) as a string select; a choice comes back as its command (``_approvals``)."""
        return await self._approvals.send_menu(target, prompt)

    async def settle_approval(self, target: OutboundMessage, message_id: str, outcome: str) -> None:
        """The question edited to ``outcome``, its buttons removed (a deleted question: nothing to do)."""
        await self._approvals.settle(target, message_id, outcome)

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        await self._sender.send_typing(chat_id, thread_id)

    async def get_chat_info(self, chat_id: str) -> ChatInfo:
        return await self._sender.get_chat_info(chat_id)

    async def create_thread(self, chat_id: str, name: str, *, from_message_id: str | None = None) -> str | None:
        """A public thread in ``chat_id`` (from a message if given); its id. None in a DM (no threads)."""
        return await self._sender.create_thread(chat_id, name, from_message_id)

    def open_stream(self, target: OutboundMessage) -> ReplyStream | None:
        """Post the answer to ``target`` once there is text, then edit it as it grows (None when
        ``platforms.discord.streaming`` is off)."""
        if not self.settings.streaming:
            return None
        return self._stream(target, ())

    def resume_stream(self, target: OutboundMessage, message_ids: tuple[str, ...]) -> ReplyStream | None:
        """The messages of an answer cut off by a crash, to be edited into the recovered text (also when
        streaming has been switched off since: editing them beats posting the answer twice)."""
        return self._stream(target, message_ids) if message_ids else None

    def _stream(self, target: OutboundMessage, message_ids: tuple[str, ...]) -> DiscordStream:
        return DiscordStream(target, sender=self._sender, client=lambda: self._client, windows=self._windows,
                             split=self.split, message_ids=message_ids)
