"""The Slack adapter, on slack-bolt's ``AsyncApp``: Socket Mode (default) or the Events API.

- **Start**: ``auth.test`` with the bot token (who the bot is, for mention and
  self-message filtering) and, in Socket Mode, one ``apps.connections.open``
  with the app token, whose URL the SDK then connects to (it would otherwise
  ask for another). A rejected token is a ``FatalAdapterError`` with a clear
  message; the SDK alone would retry a bad app token forever.
- **Intake**: Bolt acks every event before any work (its default
  ``process_before_response=False``). Bolt is given the bot's identity from
  that start-up ``auth.test`` (its ``authorize`` hook), so no Web API call
  (and no 429 wait of a retry handler) stands between an event and its ack;
  Bolt's own client has no 429 retry handler. Our listener only converts the
  event and schedules its dispatch, per chat in arrival order. Slack retries are not
  deduplicated by Bolt: we drop a repeated ``event_id`` here, and the router's
  persistent dedupe on ``<channel>:<ts>`` absorbs the rest (a redelivery
  minutes later, or the ``message`` + ``app_mention`` pair of one post).
- **HTTP mode**: the events route lives on the daemon's own aiohttp server
  (``add_routes``). The signature is checked before anything is parsed: a
  missing, wrong or stale (> 5 min) one is 401 and nothing is dispatched.
- **Socket Mode liveness**: the SDK's own reconnect is off; one watchdog owns
  reconnection. The SDK pings every ``ping_interval`` (aiohttp's heartbeat
  closes a socket whose pong does not come); the watchdog sees a closed or
  silent socket, reports ``health = "degraded"`` and reconnects once, under
  the SDK's connect lock (the old socket is closed and its receiver
  cancelled first, so there are never two live handlers).
- **Output**: Markdown -> mrkdwn, split to 4000 characters (of the converted
  text), in the message's ``thread_id``: in a channel that is the thread of
  the message answered (a top-level message the bot answers is keyed as the
  thread it starts, see ``_inbound``); in a DM the answer stays where the
  user wrote (top level, or the DM thread). 429 waits out
  Retry-After (the SDK's rate-limit retry handler). While the agent works, a
  "thinking" placeholder is posted in that thread and the answer is edited
  into it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections import OrderedDict, deque
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
import structlog
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import run_async_bolt_app, send_async_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from .._dispatch import ChatOrderedDispatch
from .._split import split_text
from ..base import (
    Adapter,
    AdapterError,
    ChatInfo,
    ChatType,
    Disposition,
    FatalAdapterError,
    InboundMessage,
    OutboundMessage,
    SendKind,
    SendResult,
)
from ..settings import reveal
from ._inbound import (
    PLATFORM,
    BotIdentity,
    clean_text,
    command_to_inbound,
    command_well_formed,
    to_inbound,
    well_formed,
)
from ._mrkdwn import mrkdwn_budget, to_mrkdwn
from ._settings import SlackSettings
from ._signing import signature_valid

__all__ = ["SlackAdapter"]

log = structlog.get_logger("hermes.slack")

#: Slack's answers to a token it does not accept: retrying cannot help.
_AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type"}
)
STOP_WAIT = 5.0
#: How many event ids (and bot threads) are remembered.
MEMORY = 10_000
#: Reconnect attempts in a row that may fail before the connection is given up (the runner restarts it).
RECONNECT_FAILURES = 3
THREAD_TITLE_MAX = 150


class _Bounded(OrderedDict[Any, float]):
    """An insertion-ordered set that forgets its oldest entries past ``MEMORY``."""

    def add(self, key: Any) -> None:
        self[key] = time.monotonic()
        self.move_to_end(key)
        while len(self) > MEMORY:
            self.popitem(last=False)


class _SocketHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler, with envelopes Bolt cannot take acknowledged and dropped."""

    async def handle(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        start = time.time()
        response: BoltResponse | None = None
        if (req.type == "events_api" and well_formed(req.payload)) or (
            req.type == "slash_commands" and command_well_formed(req.payload)
        ):
            try:
                response = await run_async_bolt_app(self.app, req)
            except Exception as exc:
                log.warning("slack.event_malformed", envelope_type=req.type, error=type(exc).__name__)
        if response is None or response.status != 200:
            # Retrying cannot make Bolt take it: acknowledge, or Slack redelivers it for hours.
            log.warning("slack.event_dropped", envelope_type=req.type,
                        status=None if response is None else response.status)
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        await send_async_response(client, req, response, start)


def _api_error(exc: SlackApiError) -> str:
    data = getattr(exc.response, "data", None)
    error = data.get("error") if isinstance(data, dict) else None
    return str(error or f"HTTP {getattr(exc.response, 'status_code', '?')}")


class SlackAdapter(Adapter):
    platform = PLATFORM
    #: Slack's readable limit (the hard one is 40,000); measured on the mrkdwn text
    max_message_length = 4000
    supports_recovery = True
    threads_are_chats = True

    def __init__(self, settings: SlackSettings) -> None:
        super().__init__()
        self.settings = settings
        #: "starting" | "live" | "degraded" | "failed", with why when not live (read by /readyz)
        self.health: str = "starting"
        self.health_reason: str | None = None
        #: the last health changes, oldest first (for /status and tests)
        self.health_log: deque[tuple[float, str, str | None]] = deque(maxlen=50)
        #: Socket Mode reconnects made by the watchdog (observability for tests and /status)
        self.reconnects = 0
        self._client: AsyncWebClient | None = None
        self._session: aiohttp.ClientSession | None = None
        self._app: AsyncApp | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._me: BotIdentity | None = None
        self._stopping = asyncio.Event()
        self._loop_done: asyncio.Event | None = None
        self._seen_events = _Bounded()
        self._bot_threads = _Bounded()
        self._replied = _Bounded()
        #: (channel, ts answered) -> (task posting the placeholder, set once its post has started)
        self._placeholders: dict[tuple[str, str], tuple[asyncio.Task[str | None], asyncio.Event]] = {}
        self._dispatches = ChatOrderedDispatch(PLATFORM, self.dispatch, after=self._after_dispatch)
        self._background: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ health

    def _set_health(self, health: str, reason: str | None = None) -> None:
        if (health, reason) != (self.health, self.health_reason):
            self.health, self.health_reason = health, reason
            self.health_log.append((time.time(), health, reason))
            log.info("slack.health", health=health, reason=reason)

    # --------------------------------------------------------------- lifecycle

    def _make_client(self) -> AsyncWebClient:
        s = self.settings
        if self._session is None or self._session.closed:
            # One pool for every send: a session per call (the SDK default) costs a handshake each.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=128))
        client = AsyncWebClient(
            token=reveal(s.bot_token), base_url=s.api_base_url, timeout=int(s.request_timeout), session=self._session
        )
        client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=s.rate_limit_retries))
        return client

    def _make_app(self, me: BotIdentity, team_id: str | None, enterprise_id: str | None) -> AsyncApp:
        s = self.settings
        http = s.mode == "http"

        async def authorize(enterprise_id: str | None, team_id: str | None, user_id: str | None) -> AuthorizeResult:
            # What Bolt's single-team authorization would build from its own lazy auth.test, from ours.
            return AuthorizeResult(enterprise_id=known_enterprise or enterprise_id, team_id=known_team or team_id,
                                   bot_user_id=me.user_id, bot_id=me.bot_id, bot_token=reveal(s.bot_token), user_id=user_id)

        known_team, known_enterprise = team_id, enterprise_id
        # Bolt's client: no token (the authorize result gives each request its own) and not our 429
        # retry handler, so nothing Bolt does can wait out a Retry-After.
        bolt_client = AsyncWebClient(base_url=s.api_base_url, timeout=int(s.request_timeout), session=self._session)
        app = AsyncApp(
            client=bolt_client,
            authorize=authorize,
            signing_secret=reveal(s.signing_secret),
            request_verification_enabled=http,
            process_before_response=False,
            logger=logging.getLogger("hermes.slack.bolt"),
        )

        # Every event type gets this listener: an unmatched one would be a 404, which Slack retries.
        @app.event(re.compile(".*"))
        async def on_event(body: dict[str, Any]) -> None:
            self._take_event(body)

        @app.command(re.compile(".*"))
        async def on_command(ack: Any, body: dict[str, Any]) -> None:
            await ack()  # the answer comes as a message, like every other answer
            message = command_to_inbound(body)
            if message is not None:
                self._dispatches.schedule(message)

        return app

    async def _identify(self, client: AsyncWebClient) -> tuple[BotIdentity, dict[str, Any]]:
        try:
            resp = await client.auth_test()
        except SlackApiError as exc:
            error = _api_error(exc)
            if error in _AUTH_ERRORS:
                raise FatalAdapterError(
                    f"Slack rejected the bot token ({error} on auth.test). Check SLACK_BOT_TOKEN: the "
                    "xoxb-... 'Bot User OAuth Token' under OAuth & Permissions of your app at api.slack.com/apps."
                ) from None
            raise AdapterError(f"Slack auth.test failed: {error}") from None
        user_id, bot_id = resp.get("user_id"), resp.get("bot_id")
        if not isinstance(user_id, str) or not user_id:
            raise AdapterError("Slack auth.test answered without a user_id")
        data = resp.data if isinstance(resp.data, dict) else {}
        return BotIdentity(user_id=user_id, bot_id=bot_id if isinstance(bot_id, str) else None), data

    async def _open_socket_url(self, client: AsyncWebClient) -> str:
        """``apps.connections.open`` with the app token (once: the SDK connects to the URL it gives)."""
        token = reveal(self.settings.app_token)
        if not token:
            raise FatalAdapterError(
                "Slack Socket Mode needs SLACK_APP_TOKEN: an app-level token (xapp-...) with the "
                "connections:write scope, from Basic Information > App-Level Tokens at api.slack.com/apps "
                "(or set platforms.slack.mode to http)."
            )
        try:
            resp = await client.apps_connections_open(app_token=token)
        except SlackApiError as exc:
            error = _api_error(exc)
            if error in _AUTH_ERRORS:
                raise FatalAdapterError(
                    f"Slack rejected the app token ({error} on apps.connections.open). Check SLACK_APP_TOKEN: "
                    "an app-level token (xapp-...) with connections:write, and that Socket Mode is enabled."
                ) from None
            raise AdapterError(f"Slack apps.connections.open failed: {error}") from None
        url = resp.get("url")
        if not isinstance(url, str) or not url:
            raise AdapterError("Slack apps.connections.open answered without a url")
        return url

    async def connect(self) -> None:
        self._stopping.clear()
        done = asyncio.Event()
        self._loop_done = done
        try:
            client = self._make_client()
            self._client = client
            self._me, auth = await self._identify(client)
            team, enterprise = auth.get("team_id"), auth.get("enterprise_id")
            self._app = self._make_app(self._me, team if isinstance(team, str) else None,
                                       enterprise if isinstance(enterprise, str) else None)
            if self.settings.mode == "http":
                self.ready.set()
                self._set_health("live")
                log.info("slack.events_api", path=self.settings.events_path, bot_user=self._me.user_id)
                await self._stopping.wait()
            else:
                await self._serve_socket(self._app, await self._open_socket_url(client))
        except FatalAdapterError as exc:
            self._set_health("failed", str(exc))
            raise
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            # Library errors may quote request details: the runner sees our own text only.
            self._set_health("degraded", f"{type(exc).__name__}")
            raise AdapterError(f"Slack connection failed ({type(exc).__name__})") from None
        except AdapterError as exc:
            self._set_health("degraded", str(exc))
            raise
        finally:
            self.ready.clear()
            await self._close_socket()
            done.set()

    async def _serve_socket(self, app: AsyncApp, url: str) -> None:
        s = self.settings
        handler = _SocketHandler(
            app, app_token=reveal(s.app_token), logger=logging.getLogger("hermes.slack.socket"), ping_interval=s.ping_interval
        )
        sm = handler.client
        # One owner of reconnection (the watchdog below); the SDK's own would race it.
        sm.default_auto_reconnect_enabled = False
        sm.auto_reconnect_enabled = False
        sm.wss_uri = url  # the SDK connects here instead of asking apps.connections.open again
        self._socket = handler
        connect_bound = max(10.0, 3 * s.ping_interval)
        try:
            await asyncio.wait_for(handler.connect_async(), connect_bound)  # type: ignore[no-untyped-call]
        except TimeoutError:
            raise AdapterError(f"Slack Socket Mode did not connect within {connect_bound:g}s") from None
        self.ready.set()
        self._set_health("live")
        log.info("slack.socket_connected", bot_user=self._me.user_id if self._me else None)
        interval = s.watchdog_interval or s.ping_interval / 2
        failures = 0
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), interval)
            if self._stopping.is_set() or await self._socket_alive(sm):
                continue
            self._set_health("degraded", "the Socket Mode connection went silent or closed; reconnecting")
            self.reconnects += 1
            log.warning("slack.socket_reconnecting", reconnects=self.reconnects)
            try:
                await asyncio.wait_for(sm.connect_to_new_endpoint(), connect_bound)
            except Exception as exc:
                failures += 1
                log.warning("slack.socket_reconnect_failed", error=type(exc).__name__, failures=failures)
                if failures >= RECONNECT_FAILURES:
                    raise AdapterError(f"Slack Socket Mode reconnect failed {failures} times") from None
                continue
            # The new socket's first pong has not come yet: do not count the old silence against it.
            sm.last_ping_pong_time = time.time()
            if await self._socket_alive(sm):
                failures = 0
                self._set_health("live")
                log.info("slack.socket_reconnected", reconnects=self.reconnects)

    @staticmethod
    async def _socket_alive(sm: Any) -> bool:
        session = sm.current_session
        if session is None or session.closed:
            return False
        return not await sm.is_ping_pong_failing()

    async def _close_socket(self) -> None:
        handler, self._socket = self._socket, None
        if handler is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(handler.close_async(), STOP_WAIT)  # type: ignore[no-untyped-call]

    async def disconnect(self) -> None:
        self._stopping.set()
        self.ready.clear()
        done = self._loop_done
        if done is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), STOP_WAIT)
        await self._close_socket()
        for task, posting in self._placeholders.values():
            if not posting.is_set():
                task.cancel()
        pending = set(self._dispatches.pending) | set(self._background)
        if pending:
            await asyncio.wait(pending, timeout=STOP_WAIT)
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        if self.health != "failed":
            self._set_health("starting", "stopped")

    # ------------------------------------------------------------------ intake

    def _take_event(self, body: Any) -> None:
        """Bolt's listener: never waits for the router (the ack has gone already, or goes now)."""
        me = self._me
        if me is None or not isinstance(body, dict):
            return
        event_id = body.get("event_id")
        if isinstance(event_id, str) and event_id:
            if event_id in self._seen_events:
                log.info("slack.event_duplicate", event_id=event_id)
                return
            self._seen_events.add(event_id)
        try:
            message = to_inbound(
                body.get("event"),
                me,
                free_response=self.settings.free_response_channels,
                in_bot_thread=lambda channel, thread: (channel, thread) in self._bot_threads,
            )
        except Exception as exc:
            # Never the payload: it is a user's message.
            log.warning("slack.event_malformed", event_id=event_id, error=type(exc).__name__)
            return
        if message is None:
            return
        self._dispatches.schedule(message)

    def _after_dispatch(self, message: InboundMessage, disposition: Disposition) -> None:
        if disposition is Disposition.ACCEPTED and self.settings.thinking_placeholder:
            self._start_placeholder(message)

    # ------------------------------------------------------------- HTTP mode

    def add_routes(self, app: web.Application) -> None:
        """The Events API route on the daemon's own HTTP server (HTTP mode only)."""
        if self.settings.mode == "http":
            app.router.add_post(self.settings.events_path, self._http_events)

    async def _http_events(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if not signature_valid(reveal(self.settings.signing_secret), raw, request.headers):
            log.warning("slack.request_rejected", reason="bad, stale or missing signature", remote=request.remote)
            return web.json_response({"error": "invalid request"}, status=401)
        bolt = self._app
        if bolt is None or not self.ready.is_set():
            return web.json_response({"error": "not ready"}, status=503)  # Slack retries it later
        try:
            body = raw.decode("utf-8")
            if request.content_type == "application/json":
                usable = well_formed(json.loads(body))
            else:  # slash commands are form posts
                usable = command_well_formed(dict(parse_qsl(body, keep_blank_values=True)))
        except ValueError:  # UnicodeDecodeError included
            usable = False
        if not usable:
            # Signed, so from Slack, but unusable: acknowledge it, or Slack sends it again and again.
            log.warning("slack.event_malformed", event_id=None)
            return web.Response(status=200)
        try:
            bolt_request = AsyncBoltRequest(body=body, query=request.query_string, headers=dict(request.headers))
            response = await bolt.async_dispatch(bolt_request)
        except Exception as exc:
            log.warning("slack.event_malformed", event_id=None, error=type(exc).__name__)
            return web.Response(status=200)
        if response.status >= 404 and response.status != 429:
            # Bolt could not take a signed event (odd shape): a retry gets the same answer.
            log.warning("slack.event_dropped", status=response.status)
            return web.Response(status=200)
        headers = {k: v for k, v in response.first_headers_without_set_cookie().items() if k.lower() != "content-length"}
        return web.Response(status=response.status, body=response.body, headers=headers)

    # ------------------------------------------------------------------ output

    def _require_client(self) -> AsyncWebClient:
        client = self._client
        if client is None:
            raise AdapterError("the Slack adapter is not connected")
        return client

    def split(self, text: str) -> list[str]:
        # Measured on the escaped text: every chunk fits once converted.
        return split_text(text, self.max_message_length, mrkdwn_budget)

    def _start_placeholder(self, message: InboundMessage) -> None:
        ts = message.message_id
        if ts is None:
            return
        key = (message.chat_id, ts)
        if key in self._replied or key in self._placeholders:
            return  # the answer beat us to it
        posting = asyncio.Event()
        task = asyncio.create_task(self._post_placeholder(message.chat_id, message.thread_id, posting))
        self._placeholders[key] = (task, posting)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _post_placeholder(self, channel: str, thread_ts: str | None, posting: asyncio.Event) -> str | None:
        # Only a slow answer gets one: a quick one would cost a second message (and Slack's
        # per-channel message rate) for a placeholder nobody had time to read.
        if self.settings.thinking_delay > 0:
            await asyncio.sleep(self.settings.thinking_delay)
        posting.set()
        try:
            resp = await self._require_client().chat_postMessage(
                channel=channel, text=self.settings.thinking_text, thread_ts=thread_ts
            )
        except Exception as exc:
            log.debug("slack.placeholder_failed", chat_id=channel, error=type(exc).__name__)
            return None
        ts = resp.get("ts")
        return ts if isinstance(ts, str) else None

    async def _take_placeholder(self, channel: str, reply_to: str) -> str | None:
        entry = self._placeholders.pop((channel, reply_to), None)
        if entry is None:
            return None
        task, posting = entry
        if not posting.is_set():
            task.cancel()  # still waiting out thinking_delay: nothing was posted
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.settings.request_timeout)
        except Exception:
            return None

    async def send(self, message: OutboundMessage) -> SendResult:
        text = clean_text(message.text)
        if not text.strip():
            return SendResult()  # Slack refuses empty messages; nothing visible is lost
        client = self._require_client()
        channel = message.chat_id
        # Where the message answered was: its thread in a channel (a top-level one carries its own ts as
        # thread_id), the DM itself or the DM thread it was written in.
        thread_ts = message.thread_id
        placeholder: str | None = None
        if message.reply_to and message.kind is not SendKind.ACK:
            self._replied.add((channel, message.reply_to))
            placeholder = await self._take_placeholder(channel, message.reply_to)
        body = to_mrkdwn(text)
        if thread_ts:
            # Before the call: a user's follow-up can arrive before Slack's answer to it does.
            self._bot_threads.add((channel, thread_ts))
        try:
            if placeholder is not None:
                try:
                    await client.chat_update(channel=channel, ts=placeholder, text=body)
                    ts: Any = placeholder
                except SlackApiError as exc:
                    # The placeholder was deleted meanwhile: post the answer as a new message.
                    log.warning("slack.placeholder_lost", chat_id=channel, error=_api_error(exc))
                    placeholder = None
            if placeholder is None:
                resp = await client.chat_postMessage(channel=channel, text=body, thread_ts=thread_ts)
                ts = resp.get("ts")
        except SlackApiError as exc:
            raise AdapterError(f"Slack refused the message ({_api_error(exc)})") from None
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            raise AdapterError(f"Slack send failed ({type(exc).__name__})") from None
        return SendResult((str(ts),) if isinstance(ts, str) else ())

    async def get_chat_info(self, chat_id: str) -> ChatInfo:
        client = self._require_client()
        try:
            resp = await client.conversations_info(channel=chat_id)
        except SlackApiError as exc:
            raise AdapterError(f"Slack channel {chat_id} is not reachable: {_api_error(exc)}") from None
        channel = resp.get("channel") or {}
        kind = ChatType.DM if channel.get("is_im") else ChatType.CHANNEL
        name = channel.get("name") if isinstance(channel.get("name"), str) else None
        return ChatInfo(chat_id=chat_id, chat_type=kind, name=name)

    async def create_thread(self, chat_id: str, name: str, *, from_message_id: str | None = None) -> str | None:
        """A seed message titled ``name``; its ts is the thread. Under ``from_message_id`` when given."""
        client = self._require_client()
        title = " ".join(clean_text(name).split())[:THREAD_TITLE_MAX] or "Conversation"
        seed = f"🧵 *{to_mrkdwn(title).replace('*', '')}*"
        try:
            resp = await client.chat_postMessage(channel=chat_id, text=seed, thread_ts=from_message_id)
        except SlackApiError as exc:
            raise AdapterError(f"Slack could not open a thread in {chat_id}: {_api_error(exc)}") from None
        thread = from_message_id or resp.get("ts")
        if not isinstance(thread, str):
            raise AdapterError("Slack chat.postMessage answered without a ts")
        self._bot_threads.add((chat_id, thread))
        log.info("slack.thread_created", chat_id=chat_id, thread_id=thread)
        return thread
