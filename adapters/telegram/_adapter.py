"""The Telegram adapter, on python-telegram-bot's ``Bot`` (no ``Application``): its life.

This module connects and disconnects; the work is done by its parts:

- ``_client``: the bot and its HTTP layer (getMe, a token Telegram refuses);
- ``_polling`` (default) or ``_webhook``: updates in, with their failure handling;
- ``_intake`` and ``_inbound``: one update -> one ``InboundMessage`` -> the router (``_media_in``: the
  files it carries; ``_albums``: an album's updates as one message);
- ``_media_fetch``: a file's bytes, when the gateway asks for them (``fetch``);
- ``_outbound`` and ``_format``: replies out, as MarkdownV2 with a plain-text fallback;
- ``_stream``: an answer shown while it is written (drafts in private chats, edits elsewhere);
- ``_files_out`` (with ``_files_plan``): an answer's files, as photos, albums, voice notes and documents;
- ``_approvals``: an approval question with inline buttons, edited into its outcome; a press in.

``ready`` is set once getMe, deleteWebhook and a first (short) getUpdates
succeeded; in webhook mode once getMe and setWebhook did. A disconnect lets the
router take what arrived, acknowledges it to Telegram, and lets replies already
on their way finish before the HTTP clients close.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from aiohttp import web
from telegram import BotCommand

from .._split import split_text
from ..approvals import ApprovalPrompt
from ..base import Adapter, AdapterError, ChatInfo, ChatType, OutboundMessage, ReplyStream, SendResult
from ..choices import ChoicePrompt
from ..commands import MENU_FOR_TELEGRAM, MenuCommand
from ..media import Attachment, OutboundFile
from ._approvals import ApprovalButtons
from ._client import BotConnection
from ._files_out import FileSender
from ._format import markdown_v2_budget
from ._inbound import PLATFORM
from ._intake import UpdateIntake
from ._media_fetch import fetch_file
from ._outbound import Sender
from ._polling import Poller
from ._settings import TelegramSettings
from ._stream import Streams
from ._webhook import Webhook

__all__ = ["TelegramAdapter"]

STOP_WAIT = 5.0
MIB = 1024 * 1024


class TelegramAdapter(Adapter):
    platform = PLATFORM
    max_message_length = 4096  # UTF-16 code units
    supports_recovery = True
    collapses_reasoning = True
    #: how long the parts of an album are waited for after the last one came (seconds)
    media_group_window: float = 0.8
    max_upload_bytes = 50 * MIB  # the Bot API's upload limit (a local Bot API server takes more)

    #: the bot's command menu (``setMyCommands``): ``adapters.commands.CommandMenu``
    menu_rules = MENU_FOR_TELEGRAM

    def __init__(self, settings: TelegramSettings) -> None:
        super().__init__()
        self.settings = settings
        self._connection = BotConnection(settings)
        self._stopping = asyncio.Event()
        self._loop_done: asyncio.Event | None = None
        self._sender = Sender(settings, self._connection)
        self._streams = Streams(self._sender, self.split)
        self.max_upload_bytes = int(settings.max_upload_mb * MIB)
        self._files = FileSender(settings, self._sender, lambda: self.max_upload_bytes)
        self._buttons = ApprovalButtons(self._sender, self._connection)
        self._intake = UpdateIntake(settings, self._connection, self.dispatch, self._sender.note_forum,
                                    download_limit=lambda: self.max_download_bytes,
                                    album_window=lambda: self.media_group_window, buttons=self._buttons)
        self._poller = Poller(settings, self._connection, self._intake, self.ready, self._stopping)
        self._webhook = Webhook(settings, self._connection, self._intake, self.ready, self._stopping)

    # ------------------------------------------------------------------ state

    @property
    def bot_username(self) -> str | None:
        return self._connection.username

    @property
    def account_id(self) -> str | None:
        me = self._connection.me
        return str(me.id) if me is not None else None

    @property
    def health(self) -> str:
        """Inbound liveness for /readyz: "degraded" while getUpdates keeps stalling or failing."""
        if not self.ready.is_set():
            return "starting"
        return "degraded" if self._poller.failures else "live"

    @property
    def health_reason(self) -> str | None:
        if self.ready.is_set() and self._poller.failures:
            return f"getUpdates stalled or failed {self._poller.failures} time(s) in a row; polling restarted"
        return None

    @property
    def stall_restarts(self) -> int:
        """How often the watchdog restarted polling (for tests and metrics)."""
        return self._poller.stall_restarts

    # -------------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        self._stopping.clear()
        done = asyncio.Event()
        self._loop_done = done
        try:
            bot = await self._connection.ensure()
            if self.settings.mode == "webhook":
                await self._webhook.serve(bot)
            else:
                await self._poller.run(bot)
        finally:
            done.set()

    async def disconnect(self) -> None:
        self._stopping.set()
        self.ready.clear()
        done = self._loop_done
        if done is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), STOP_WAIT)
        await self._intake.wait(STOP_WAIT)
        bot = self._connection.bot
        if bot is None:
            return
        if self.settings.mode == "polling":
            await self._poller.acknowledge(bot)
        # Replies already on their way finish first (a reconnect after a crash must not cut them off).
        await self._sender.wait_idle(STOP_WAIT)
        await self._connection.shutdown()

    def add_routes(self, app: web.Application) -> None:
        """The webhook route on the daemon's own HTTP server (webhook mode only)."""
        if self.settings.mode == "webhook":
            self._webhook.add_routes(app)

    # ----------------------------------------------------------------- output

    def split(self, text: str) -> list[str]:
        # Measured in UTF-16 units of the escaped text: every chunk fits once converted.
        return split_text(text, self.max_message_length, markdown_v2_budget)

    async def send(self, message: OutboundMessage) -> SendResult:
        return await self._sender.send(message)

    async def send_files(self, target: OutboundMessage, files: tuple[OutboundFile, ...], *,
                         sent: Callable[[int], Awaitable[None]] | None = None) -> SendResult:
        """Images as photos (runs of them as albums), voice notes, audio and documents, in order (``_files_out``)."""
        return await self._files.send(target, files, sent=sent)

    def open_stream(self, target: OutboundMessage) -> ReplyStream | None:
        """A draft in a private chat, a message edited in place elsewhere (``_stream``)."""
        if not self.settings.streaming:
            return None
        return self._streams.open(target)

    def resume_stream(self, target: OutboundMessage, message_ids: tuple[str, ...]) -> ReplyStream | None:
        # Not tied to ``streaming``: the messages a cut-off stream left are edited into the answer even
        # if streaming was switched off since. A draft leaves none: its answer goes out anew.
        if not message_ids:
            return None
        return self._streams.editing(target, message_ids)

    async def fetch(self, attachment: Attachment, *, limit: int) -> AsyncIterator[bytes]:
        """A file of an inbound message, by its ``file_id``: getFile, then ``base_file_url`` (``_media_fetch``)."""
        if attachment.data is not None:
            async for chunk in super().fetch(attachment, limit=limit):
                yield chunk
            return
        async for chunk in fetch_file(self._connection, attachment, limit=limit,
                                      read_timeout=self.settings.request_timeout):
            yield chunk

    async def send_approval(self, target: OutboundMessage, prompt: ApprovalPrompt) -> str | None:
        """The question with Approve / Always / Deny buttons (``_approvals``)."""
        return await self._buttons.send(target, prompt)

    async def send_choices(self, target: OutboundMessage, prompt: ChoicePrompt) -> str | None:
        """A menu (/model) as an inline keyboard, one option a row (``_approvals``)."""
        return await self._buttons.send_menu(target, prompt)

    async def settle_approval(self, target: OutboundMessage, message_id: str, outcome: str) -> None:
        """The question (or menu) edited into its outcome, its buttons gone."""
        await self._buttons.settle(target, message_id, outcome)

    async def set_command_menu(self, commands: Sequence[MenuCommand]) -> None:
        """``setMyCommands`` for the default scope: the menu every chat shows."""
        bot = self._connection.bot
        if bot is None:
            raise AdapterError("telegram is not connected")
        await bot.set_my_commands([BotCommand(c.name, c.description) for c in commands])

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        await self._sender.send_typing(chat_id, thread_id)

    async def get_chat_info(self, chat_id: str) -> ChatInfo:
        return await self._sender.get_chat_info(chat_id)

    async def handoff_refusal(self, chat_id: str, chat_type: ChatType, thread_id: str | None) -> str | None:
        return await self._sender.handoff_refusal(chat_id, chat_type, thread_id)

    async def create_thread(self, chat_id: str, name: str, *, from_message_id: str | None = None) -> str | None:
        """A forum topic where the chat is a forum; otherwise a seed message whose id threads later replies."""
        return await self._sender.create_thread(chat_id, name, from_message_id)
