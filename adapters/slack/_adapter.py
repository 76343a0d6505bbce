"""The Slack adapter, on slack-bolt's ``AsyncApp``: Socket Mode (default) or the Events API. Its life.

This module connects and disconnects; the work is done by its parts:

- ``_webapi``: the bot's Web API client, ``auth.test``, the Socket Mode URL, token errors;
- ``_socket`` (default) or ``_http``: events in over a websocket, or as signed HTTP requests;
- ``_intake``, ``_inbound`` and ``_deliveries``: one event -> one ``InboundMessage`` -> the router,
  acknowledged once the router took it (Slack retries what it deferred);
- ``_outbound`` and ``_mrkdwn``: replies out as mrkdwn, with "thinking" placeholders;
- ``_stream``: an answer shown while it is written (chat streaming, else post and edit);
- ``_files``: a message's files, fetched from files.slack.com with the bot token (``fetch``);
- ``_upload``: files out, shared in the answer's thread (``send_files``);
- ``_approvals``: approval questions with Block Kit buttons, and their presses back as commands.

``health`` is "starting", "live", "degraded" (the socket went silent, a
connection failed) or "failed" (a token Slack refuses); ``health_log`` keeps the
last changes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import structlog
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from .._health import Health
from .._http_fetch import HttpFetcher, allowed_origins
from .._split import split_text
from ..approvals import ApprovalPrompt
from ..base import (
    Adapter,
    AdapterError,
    ChatInfo,
    Disposition,
    FatalAdapterError,
    InboundMessage,
    OutboundMessage,
    ReplyStream,
    SendResult,
)
from ..choices import ChoicePrompt
from ..media import Attachment, OutboundFile
from ..settings import reveal
from ._approvals import ApprovalButtons
from ._files import FILE_HOSTS, refuse_login_page
from ._http import EventsEndpoint
from ._inbound import PLATFORM
from ._intake import EventIntake
from ._mrkdwn import mrkdwn_budget
from ._outbound import Sender
from ._settings import SlackSettings
from ._socket import SocketMode
from ._stream import SlackStream, StreamPlace, StreamSupport
from ._upload import FileUploader
from ._webapi import identify, make_web_client, open_socket_url

__all__ = ["SlackAdapter"]

log = structlog.get_logger("hermes.slack")

STOP_WAIT = 5.0
MIB = 1024 * 1024


class SlackAdapter(Adapter):
    platform = PLATFORM
    #: Slack's readable limit (the hard one is 40,000); measured on the mrkdwn text
    max_message_length = 4000
    supports_recovery = True
    threads_are_chats = True
    #: Slack's cap on one file
    max_upload_bytes = 1024 * MIB

    def __init__(self, settings: SlackSettings) -> None:
        super().__init__()
        self.settings = settings
        self._health = Health(PLATFORM, history=50)
        self._client: AsyncWebClient | None = None
        #: the same bot, without retries: streamed answers (see ``_stream``)
        self._stream_client: AsyncWebClient | None = None
        #: the workspace's team id (or its enterprise id), from auth.test
        self._workspace = ""
        #: the bot's user id in that workspace (auth.test), once connected
        self._bot_user: str | None = None
        self._stream_support = StreamSupport()
        self._session: aiohttp.ClientSession | None = None
        self._app: AsyncApp | None = None
        self._stopping = asyncio.Event()
        self._loop_done: asyncio.Event | None = None
        self._sender = Sender(settings, lambda: self._client)
        self._intake = EventIntake(settings, self.dispatch, in_bot_thread=self._sender.in_bot_thread,
                                   accepted=self._sender.start_placeholder)
        self._socket = SocketMode(settings, self.ready, self._stopping, self._health, self._intake.take_interactive,
                                  self._intake.deliver_event)
        self._events = EventsEndpoint(settings, lambda: self._app, self.ready, self._intake.take_interactive,
                                      self._intake.deliver_event)
        self._approvals = ApprovalButtons(lambda: self._client)
        self._files = HttpFetcher("Slack", allowed_origins(settings.api_base_url, *FILE_HOSTS),
                                  secret_headers=lambda: {"Authorization": f"Bearer {reveal(settings.bot_token)}"},
                                  check=refuse_login_page)
        self.max_upload_bytes = int(settings.max_upload_mb * MIB)
        self._uploads = FileUploader(self._sender, lambda: self._client, lambda: self._session,
                                     allowed_origins(settings.api_base_url, *FILE_HOSTS), lambda: self.max_upload_bytes,
                                     settings.request_timeout)

    # ------------------------------------------------------------------ state

    @property
    def health(self) -> str:
        """"starting" | "live" | "degraded" | "failed" (read by /readyz)."""
        return self._health.state

    @property
    def health_reason(self) -> str | None:
        return self._health.reason

    @property
    def health_log(self) -> deque[tuple[float, str, str | None]]:
        """The last health changes, oldest first (for /status and tests)."""
        return self._health.history

    @property
    def account_id(self) -> str | None:
        # The same app installed in two workspaces is two bot accounts: the team is part of it.
        return f"{self._workspace}:{self._bot_user}" if self._bot_user else None

    @property
    def reconnects(self) -> int:
        """Socket Mode reconnects made by the watchdog (for tests and /status)."""
        return self._socket.reconnects

    # -------------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        self._stopping.clear()
        done = asyncio.Event()
        self._loop_done = done
        try:
            if self._session is None or self._session.closed:
                # One pool for every send: a session per call (the SDK default) costs a handshake each.
                self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=128))
            client = make_web_client(self.settings, self._session)
            self._client = client
            self._stream_client = make_web_client(self.settings, self._session, retries=False)
            me, auth = await identify(client)
            team, enterprise = auth.get("team_id"), auth.get("enterprise_id")
            self._workspace = str(team or enterprise or "")
            self._bot_user = me.user_id
            self._app = self._intake.make_app(me, team if isinstance(team, str) else None,
                                              enterprise if isinstance(enterprise, str) else None, self._session)
            if self.settings.mode == "http":
                self.ready.set()
                self._health.set("live")
                log.info("slack.events_api", path=self.settings.events_path, bot_user=me.user_id)
                await self._stopping.wait()
            else:
                await self._socket.serve(self._app, await open_socket_url(client, reveal(self.settings.app_token)), me.user_id)
        except FatalAdapterError as exc:
            self._health.set("failed", str(exc))
            raise
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            # Library errors may quote request details: the runner sees our own text only.
            self._health.set("degraded", f"{type(exc).__name__}")
            raise AdapterError(f"Slack connection failed ({type(exc).__name__})") from None
        except AdapterError as exc:
            self._health.set("degraded", str(exc))
            raise
        finally:
            self.ready.clear()
            await self._socket.close()
            done.set()

    async def disconnect(self) -> None:
        self._stopping.set()
        self.ready.clear()
        done = self._loop_done
        if done is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), STOP_WAIT)
        await self._socket.close()
        self._sender.cancel_unposted()
        pending = self._intake.pending | set(self._sender.background)
        if pending:
            await asyncio.wait(pending, timeout=STOP_WAIT)
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        await self._files.close()
        if self.health != "failed":
            self._health.set("starting", "stopped")

    def add_routes(self, app: web.Application) -> None:
        """The Events API route on the daemon's own HTTP server (HTTP mode only)."""
        if self.settings.mode == "http":
            self._events.add_routes(app)

    # ------------------------------------------------------------------ media

    async def fetch(self, attachment: Attachment, *, limit: int) -> AsyncIterator[bytes]:
        """A file's bytes from its ``url_private_download``, with the bot token: only from files.slack.com
        or ``api_base_url``'s own origin, and the token never follows a redirect to another origin."""
        source = super().fetch(attachment, limit=limit) if attachment.data is not None else (
            self._files.fetch(attachment, limit=limit))
        async for chunk in source:
            yield chunk

    async def send_files(self, target: OutboundMessage, files: tuple[OutboundFile, ...], *,
                         sent: Callable[[int], Awaitable[None]] | None = None) -> SendResult:
        """``files`` shared in ``target``'s channel and thread (``files.getUploadURLExternal``, the bytes, then one
        ``files.completeUploadExternal`` per 10 files: one message each); see ``_upload``."""
        return await self._uploads.send(target, files, sent=sent)

    # ----------------------------------------------------------------- output

    def split(self, text: str) -> list[str]:
        # Measured on the escaped text: every chunk fits once converted.
        return split_text(text, self.max_message_length, mrkdwn_budget)

    async def send(self, message: OutboundMessage) -> SendResult:
        return await self._sender.send(message)

    async def send_approval(self, target: OutboundMessage, prompt: ApprovalPrompt) -> str | None:
        """The question in ``target``'s channel and thread with three Block Kit buttons; its ts. A press
        comes back as the typed command from the presser (``_approvals``)."""
        return await self._approvals.send(target, prompt)

    async def send_choices(self, target: OutboundMessage, prompt: ChoicePrompt) -> str | None:
        """A menu (/model) as a Block Kit ``static_select``; a choice comes back as its command."""
        return await self._approvals.send_menu(target, prompt)

    async def settle_approval(self, target: OutboundMessage, message_id: str, outcome: str) -> None:
        """The question (ts ``message_id``) shows ``outcome`` and no buttons (a deleted one: nothing to do)."""
        await self._approvals.settle(target, message_id, outcome)

    async def dispatch(self, message: InboundMessage) -> Disposition:
        self._sender.note_author(message)  # a streamed answer names its recipient
        return await super().dispatch(message)

    def open_stream(self, target: OutboundMessage) -> ReplyStream | None:
        """The answer to ``target`` shown as it is written; None with ``streaming: false``."""
        if not self.settings.streaming:
            return None

        async def claim() -> str | None:
            return await self._sender.claim(target)

        return SlackStream(lambda: self._stream_client, self.split, self._place(target), self._stream_support,
                           claim=claim)

    def resume_stream(self, target: OutboundMessage, message_ids: tuple[str, ...]) -> ReplyStream | None:
        """The messages of a stream cut off by a restart, edited into the recovered text (whatever
        ``streaming`` says now: a partial answer is never left beside a second, whole one)."""
        if not message_ids:
            return None
        return SlackStream(lambda: self._stream_client, self.split, self._place(target), self._stream_support,
                           message_ids=message_ids)

    def _place(self, target: OutboundMessage) -> StreamPlace:
        return StreamPlace(channel=target.chat_id, thread_ts=target.thread_id, workspace=self._workspace,
                           recipient=self._sender.author_of(target.chat_id, target.reply_to))

    async def get_chat_info(self, chat_id: str) -> ChatInfo:
        return await self._sender.get_chat_info(chat_id)

    async def create_thread(self, chat_id: str, name: str, *, from_message_id: str | None = None) -> str | None:
        """A seed message titled ``name``; its ts is the thread. Under ``from_message_id`` when given."""
        return await self._sender.create_thread(chat_id, name, from_message_id)
