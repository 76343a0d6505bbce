"""A wire-level fake of Slack for the real slack-sdk / slack-bolt: Web API, Socket Mode, Events API.

- **Web API** ``POST /api/<method>`` (JSON, form or query parameters; the token from
  ``Authorization: Bearer`` or a ``token`` parameter): ``auth.test``, ``chat.postMessage``,
  ``chat.update``, ``chat.delete``, ``conversations.info``, ``users.info``, ``apps.connections.open``
  (app token only), and the streaming methods ``chat.startStream`` / ``chat.appendStream`` /
  ``chat.stopStream`` (``streaming=False``: the workspace lacks them and answers ``unknown_method``,
  "This method is currently not available"). Errors are HTTP 200 ``{"ok": false, "error": ...}``;
  ``fail_next(method, 429, headers={"Retry-After": "1"})`` gives a rate limit.
- **Rate limits**, per method per workspace as Slack's tiers count them: ``chat.update`` Tier 3
  (50/min), ``chat.appendStream`` Tier 4 (100/min), ``chat.startStream`` and ``chat.stopStream``
  Tier 2 (20/min), ``chat.delete`` Tier 3: ``FakeSlack(rate_limits=TIER_LIMITS)``, or other counts
  per ``rate_window`` seconds (none by default). A call past its limit is HTTP 429 ``ratelimited``
  with ``Retry-After`` (whole seconds until the window has room).
- **What a person sees**: ``messages`` holds each message as it looks now (``streaming`` while a
  stream is open; ``markdown`` when its text came as ``markdown_text``); ``history`` has one entry
  per visible change (post, start, append, stop, update, delete) and ``versions(channel, ts)`` the
  texts one message showed, in order.
- **Socket Mode**: ``apps.connections.open`` hands out ``ws://127.0.0.1:<port>/socket/<n>``; the
  server says ``hello``, sends ``events_api`` envelopes and records the client's acks. Controls:
  ``disconnect(reason)`` (``refresh_requested``, ``link_disabled``), ``go_silent()`` (the socket
  stays open but nothing more is sent or answered, pings included: a half-open connection).
- **Events API**: ``post_event(body, secret=, ts=, retry_num=)`` POSTs a signed request (v0 HMAC,
  ``X-Slack-Request-Timestamp``) to ``events_url`` and returns the HTTP status.

- **Files** (``_slack_files``): ``user_says(..., files=[SlackFile(...)])`` shares files (subtype
  ``file_share``); ``files`` serves them at ``url_private`` / ``url_private_download``, to the bot
  token only (anything else gets Slack's HTML sign-in page, status 200).
- **Uploads** (``_slack_uploads``): ``files.getUploadURLExternal``, the upload URL, and
  ``files.completeUploadExternal`` (the files shared as one message); ``upload_limit`` caps a file,
  ``uploads`` keeps what arrived.
- **Select menus** (``_slack_selects``): ``static_select`` elements validated; ``user_selects``.
- **Blocks and presses** (``_slack_interactions``): Block Kit ``blocks`` on ``chat.postMessage`` /
  ``chat.update`` (validated: ``invalid_blocks``); ``user_presses(channel, ts, action_id, user=)``
  delivers a ``block_actions`` payload as an ``interactive`` envelope, or a signed form POST in HTTP
  mode; ``presses`` records them (acks land in ``acks``).
- **Scopes**: the bot token carries ``scopes`` (default ``DEFAULT_SCOPES``); a method that needs one it
  lacks (the files methods: ``files:write``) answers ``missing_scope`` with ``needed`` and ``provided``.

``user_says`` builds a ``message`` event (plus the ``app_mention`` Slack also sends for a mention)
and delivers it over the socket when one is connected, else to ``events_url``; ``redeliver(body,
retry_num)`` sends the same event (same ``event_id``) again, once, as one of Slack's retries.

- **Retries** (``_slack_retries``): an event ``user_says`` / ``deliver`` sent that is not
  acknowledged (HTTP: a non-2xx answer or none within 3 s; Socket Mode: no ack within 3 s) is
  retried like Slack does, 3 times (``X-Slack-Retry-Num`` / ``retry_attempt``); ``retry_delays``
  (Slack's 0 s, 1 min, 5 min by default), ``retry_now()``, ``event_deliveries``, ``events_given_up``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
from aiohttp import WSMsgType, web

from ._base import FakeServer, SentMessage
from ._slack_chat import BOT_ID, BOT_USER, STREAM_METHODS, TIER_LIMITS, ChatMethods
from ._slack_files import LOGIN_PAGE, SlackFile, SlackFiles
from ._slack_interactions import InteractionMethods, sign
from ._slack_retries import ACK_TIMEOUT, SLACK_RETRY_DELAYS, EventRetries
from ._slack_selects import SelectMethods
from ._slack_uploads import UPLOAD_LIMIT, PendingUpload, UploadMethods

__all__ = [
    "ACK_TIMEOUT",
    "APP_TOKEN",
    "BOT_TOKEN",
    "BOT_USER",
    "DEFAULT_SCOPES",
    "LOGIN_PAGE",
    "SIGNING_SECRET",
    "SLACK_RETRY_DELAYS",
    "TIER_LIMITS",
    "UPLOAD_LIMIT",
    "FakeSlack",
    "PendingUpload",
    "SlackFile",
    "sign",
]

BOT_TOKEN = "xoxb-1111-2222-fakebottoken"
APP_TOKEN = "xapp-1-A111-2222-fakeapptoken"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM = "T0TEAM001"
APP_ID = "A0APP0001"
#: the bot scopes the README asks for
DEFAULT_SCOPES = frozenset({"chat:write", "app_mentions:read", "im:history", "channels:history", "groups:history",
                            "files:read", "files:write"})
#: the scope a method needs beyond a valid bot token
_NEEDED = {"files.getUploadURLExternal": "files:write", "files.completeUploadExternal": "files:write"}



class _Socket:
    def __init__(self, number: int, ws: web.WebSocketResponse) -> None:
        self.number = number
        self.ws = ws
        self.silent = False
        self.closed = asyncio.Event()


class FakeSlack(ChatMethods, UploadMethods, SelectMethods, InteractionMethods, EventRetries, FakeServer):
    platform = "slack"

    def __init__(
        self,
        *,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        signing_secret: str = SIGNING_SECRET,
        user: str = "U0USER001",
        streaming: bool = True,
        rate_limits: dict[str, int] | None = None,
        rate_window: float = 60.0,
        scopes: frozenset[str] = DEFAULT_SCOPES,
        team_id: str = TEAM,
    ) -> None:
        super().__init__()
        #: the workspace the app is installed in: the same app in another one is another bot account
        self.team_id = team_id
        self.bot_token = bot_token
        self.app_token = app_token
        self.signing_secret = signing_secret
        #: the default sender of ``user_says``
        self.user = user
        #: where ``post_event`` sends Events API requests (HTTP mode); set by the test
        self.events_url: str | None = None
        #: every envelope id the client acknowledged over Socket Mode
        self.acks: list[str] = []
        #: every socket the client opened, in order
        self.sockets: list[_Socket] = []
        #: current state of every message in every channel: (channel, ts) -> message
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        #: the workspace has chat.startStream / appendStream / stopStream (False: ``unknown_method``)
        self.streaming = streaming
        #: calls per ``rate_window`` seconds, per method (``TIER_LIMITS``: Slack's tiers; none by default, so
        #: that a benchmark's load is not slowed by limits it is not measuring)
        self.rate_limits = dict(rate_limits or {})
        self.rate_window = rate_window
        #: one entry per visible change of a bot message: method, chat_id, ts, text, streaming, deleted
        self.history: list[dict[str, Any]] = []
        self._accepted: dict[str, deque[float]] = {}
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._http: aiohttp.ClientSession | None = None
        #: the files users shared, served like files.slack.com
        self.files = SlackFiles(self.team_id, lambda: self.bot_token)
        #: the scopes the bot token was granted
        self.scopes = set(scopes)
        #: the largest file ``files.getUploadURLExternal`` takes (``file_upload_size_restricted`` above)
        self.upload_limit = UPLOAD_LIMIT
        #: every upload begun, by file id
        self.uploads: dict[str, PendingUpload] = {}
        #: every button press delivered (``user_presses``), in order
        self.presses: list[dict[str, Any]] = []
        self._init_retries()

    # ------------------------------------------------------------- lifecycle

    async def _on_start(self) -> None:
        self._http = aiohttp.ClientSession()

    async def _on_stop(self) -> None:
        await self._stop_retries()
        for sock in self.sockets:
            if not sock.ws.closed:
                await sock.ws.close()
            sock.closed.set()
        if self._http is not None:
            await self._http.close()

    def _setup_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/socket/{n}", self._socket)
        self.files.add_routes(app)
        self.add_upload_routes(app)

    def _error_body(self, status: int, description: str | None) -> Any:
        return {"ok": False, "error": description or ("ratelimited" if status == 429 else "internal_error")}

    @property
    def api_base_url(self) -> str:
        return f"{self.endpoint()}/api/"

    def connected(self) -> bool:
        return bool(self.open_sockets) or bool(self.calls_to("auth.test"))

    @property
    def open_sockets(self) -> list[_Socket]:
        return [s for s in self.sockets if not s.closed.is_set() and not s.ws.closed]

    # ------------------------------------------------------------- ids

    def next_ts(self) -> str:
        n = next(self._ts)
        return f"{1_700_000_000 + n}.{n:06d}"

    def next_event_id(self) -> str:
        return f"Ev{next(self._ids):08d}"

    # -------------------------------------------------------------- Web API

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        raw = await request.read()
        if raw:
            if request.content_type == "application/json":
                try:
                    decoded = json.loads(raw)
                except ValueError:
                    decoded = None
                if isinstance(decoded, dict):
                    params.update(decoded)
            else:
                params.update(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
        auth = request.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else params.pop("token", None)
        call = self._record_call(method, params, http_method=request.method, path=request.path,
                                 headers={k: v for k, v in request.headers.items() if k.lower() != "authorization"})
        failure = self._take_failure(method)
        if failure is not None:
            return self._failure_response(call, failure)
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if not token:
            return self._respond(call, 200, {"ok": False, "error": "not_authed"})
        if token != wanted:
            other = self.bot_token if method == "apps.connections.open" else self.app_token
            return self._respond(call, 200, {"ok": False, "error": "not_allowed_token_type" if token == other
                                             else "invalid_auth"})
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None or (method in STREAM_METHODS and not self.streaming):
            return self._respond(call, 200, {"ok": False, "error": "unknown_method"})
        needed = _NEEDED.get(method)
        if needed is not None and needed not in self.scopes:
            return self._respond(call, 200, {"ok": False, "error": "missing_scope", "needed": needed,
                                             "provided": ",".join(sorted(self.scopes))})
        wait = self._rate_limited(method)
        if wait is not None:
            return self._respond(call, 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(wait)})
        return self._respond(call, 200, handler(params))

    def _m_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": "https://fake.slack.com/", "team": "Fake", "user": "hermes", "team_id": self.team_id,
                "user_id": BOT_USER, "bot_id": BOT_ID, "is_enterprise_install": False}

    def _m_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/socket/{len(self.sockets) + 1}"}

    def _m_conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        is_im = channel.startswith("D")
        return {"ok": True, "channel": {"id": channel, "name": None if is_im else f"chan-{channel.lower()}",
                                        "is_im": is_im, "is_channel": channel.startswith("C")}}

    def _m_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = str(params.get("user") or "")
        return {"ok": True, "user": {"id": user, "name": f"user-{user.lower()}", "is_bot": user == BOT_USER}}

    # ------------------------------------------------------------ Socket Mode

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        sock = _Socket(len(self.sockets) + 1, ws)
        self.sockets.append(sock)
        await ws.send_json({"type": "hello", "num_connections": len(self.open_sockets),
                            "debug_info": {"host": "fake"}, "connection_info": {"app_id": APP_ID}})
        self._notify()
        try:
            async for msg in ws:
                if sock.silent:
                    continue  # half-open: whatever the client sends goes nowhere
                if msg.type == WSMsgType.PING:
                    await ws.pong(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    try:
                        data = json.loads(msg.data)
                    except ValueError:
                        continue
                    if isinstance(data, dict) and isinstance(data.get("envelope_id"), str):
                        self.acks.append(data["envelope_id"])
                        self._notify()
        finally:
            sock.closed.set()
            self._notify()
        return ws

    def _live_socket(self) -> _Socket:
        for sock in reversed(self.open_sockets):
            if not sock.silent:
                return sock
        raise AssertionError("no Socket Mode client is connected to the fake Slack")

    async def send_envelope(self, body: dict[str, Any], *, retry_attempt: int = 0) -> str:
        """Send one ``events_api`` envelope over the newest live socket; returns its envelope id."""
        envelope_id = await self._send_event_envelope(body, retry_attempt, "timeout" if retry_attempt else "")
        if envelope_id is None:
            self._live_socket()  # raises: nothing is connected
        assert envelope_id is not None
        return envelope_id

    async def wait_ack(self, envelope_id: str, timeout: float = 5.0) -> None:
        await self.wait_for(lambda: envelope_id in self.acks, timeout, what=f"the ack of {envelope_id}")

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask the client to reconnect, as Slack does before it recycles a socket."""
        await self._live_socket().ws.send_json({"type": "disconnect", "reason": reason,
                                                "debug_info": {"host": "fake"}})

    def go_silent(self) -> None:
        """Every open socket stays open but goes quiet: no pongs, no events (a half-open connection)."""
        for sock in self.open_sockets:
            sock.silent = True

    # -------------------------------------------------------------- Events API

    async def post_event(
        self,
        body: dict[str, Any] | bytes,
        *,
        secret: str | None = None,
        ts: str | int | None = None,
        retry_num: int | None = None,
        signed: bool = True,
    ) -> int:
        """POST ``body`` to ``events_url``, signed with ``secret`` (default: the right one) at ``ts``."""
        if self.events_url is None or self._http is None:
            raise AssertionError("set fake.events_url before posting events")
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = sign(raw, self.signing_secret if secret is None else secret, ts)
        if not signed:
            headers = {"Content-Type": "application/json"}
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        async with self._http.post(self.events_url, data=raw, headers=headers,
                                   timeout=aiohttp.ClientTimeout(total=10)) as resp:
            await resp.read()
            return resp.status

    # ----------------------------------------------------------------- inbound

    def event_body(self, event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
        """An ``event_callback`` envelope around ``event``."""
        return {
            "token": "verification-token-unused", "team_id": self.team_id, "api_app_id": APP_ID, "type": "event_callback",
            "event_id": event_id or self.next_event_id(), "event_time": int(time.time()),
            "authorizations": [{"team_id": self.team_id, "user_id": BOT_USER, "is_bot": True}], "event": event,
        }

    async def deliver(self, body: dict[str, Any], *, retry_num: int = 0) -> Any:
        """Send an event body the way the client listens: over the socket if one is live, else HTTP.
        A first delivery (``retry_num`` 0) is retried like Slack's (``_slack_retries``); the result
        is its envelope id (Socket Mode) or HTTP status (None: no answer within ``ack_timeout``)."""
        # Socket Mode (no events URL) with no live socket is still a Socket Mode delivery: it fails
        # and is retried, as on Slack; never an HTTP post to nowhere.
        socket = any(not s.silent for s in self.open_sockets) or self.events_url is None
        if retry_num == 0:
            return await self.deliver_retrying(body, socket)
        if socket:
            return await self.send_envelope(body, retry_attempt=retry_num)
        return await self.post_event(body, retry_num=retry_num)

    async def user_says(
        self,
        text: str,
        *,
        chat: Any = None,
        user: Any = None,
        thread: Any = None,
        channel_type: str | None = None,
        mention: bool = False,
        files: Sequence[SlackFile] = (),
        **kw: Any,
    ) -> dict[str, Any]:
        """A user posts ``text`` in ``chat`` (default: a DM "D0DM0001"); returns the ``message`` event body.

        ``files``: shared with the message, which then has subtype ``file_share``, as on Slack.

        ``mention=True`` prefixes the bot's mention and, like Slack, also sends an ``app_mention``
        event for the same ``ts`` (with its own event id).
        """
        channel = str(chat or "D0DM0001")
        if channel_type is None:
            channel_type = "im" if channel.startswith("D") else ("group" if channel.startswith("G") else "channel")
        if mention:
            text = f"<@{BOT_USER}> {text}"
        ts = self.next_ts()
        event: dict[str, Any] = {"type": "message", "user": str(user or self.user), "text": text, "ts": ts,
                                 "channel": channel, "channel_type": channel_type, "event_ts": ts, "team": self.team_id}
        if files:
            event.update({"subtype": "file_share", "upload": False, "display_as_bot": False,
                          "files": [self.files.file_object(self.endpoint(), event["user"], f) for f in files]})
        if thread is not None:
            event["thread_ts"] = str(thread)
            parent = self.messages.get((channel, str(thread)))
            if parent is not None:
                event["parent_user_id"] = parent.get("user")
        event.update(kw)
        self.messages[(channel, ts)] = dict(event)
        body = self.event_body(event)
        await self.deliver(body)
        if mention:
            mention_event = {k: v for k, v in event.items() if k != "channel_type"}
            mention_event["type"] = "app_mention"
            await self.deliver(self.event_body(mention_event))
        return body

    async def slash_command(self, command: str, text: str = "", *, chat: str = "D0DM0001",
                            user: str | None = None) -> dict[str, Any]:
        """A user runs a slash command: a ``slash_commands`` envelope, or a signed form POST (HTTP)."""
        from urllib.parse import urlencode

        payload = {"token": "unused", "team_id": self.team_id, "team_domain": "fake", "channel_id": chat,
                   "channel_name": "directmessage" if chat.startswith("D") else f"chan-{chat.lower()}",
                   "user_id": user or self.user, "user_name": "someone", "command": command, "text": text,
                   "api_app_id": APP_ID, "response_url": f"{self.endpoint()}/response/{next(self._ids)}",
                   "trigger_id": f"trig.{next(self._ids)}"}
        if any(not s.silent for s in self.open_sockets):
            envelope_id = f"env-{next(self._ids)}"
            await self._live_socket().ws.send_json({"envelope_id": envelope_id, "type": "slash_commands",
                                                    "payload": payload, "accepts_response_payload": True})
            payload["envelope_id"] = envelope_id
            return payload
        if self.events_url is None or self._http is None:
            raise AssertionError("no socket and no events_url: nowhere to send the command")
        raw = urlencode(payload).encode()
        headers = sign(raw, self.signing_secret) | {"Content-Type": "application/x-www-form-urlencoded"}
        async with self._http.post(self.events_url, data=raw, headers=headers,
                                   timeout=aiohttp.ClientTimeout(total=10)) as resp:
            payload["status"] = resp.status
        return payload

    async def redeliver(self, body: dict[str, Any], retry_num: int = 1) -> Any:
        """The same event again (same ``event_id``), as one of Slack's retries."""
        return await self.deliver(body, retry_num=retry_num)

    # ------------------------------------------------------------------ reads

    def thread_replies(self, channel: str, thread_ts: str | None) -> list[dict[str, Any]]:
        """The bot's messages in a thread (``thread_ts`` None: at the top level of the channel), as they
        look now (placeholders edited)."""
        return [m for (c, _), m in sorted(self.messages.items(), key=lambda kv: kv[0][1])
                if c == channel and m.get("thread_ts") == thread_ts and m.get("user") == BOT_USER]

    async def wait_reply(self, channel: str, thread_ts: str | None, n: int = 1, timeout: float = 5.0,
                         thinking: str = "thinking", text: str | None = None) -> list[dict[str, Any]]:
        """Wait until the bot has ``n`` finished messages (no placeholder left, no stream open) in a thread (None: at the
        top level of the channel), one of them reading exactly ``text`` if given; return them all."""

        def done() -> list[dict[str, Any]] | None:
            got = self.thread_replies(channel, thread_ts)
            finished = [m for m in got if thinking not in m["text"] and not m.get("streaming")]
            if text is not None and not any(m["text"] == text for m in finished):
                return None
            return got if len(finished) >= n and len(finished) == len(got) else None

        try:
            return list(await self.wait_for(done, timeout, what=f"{n} bot message(s) in thread {channel}/{thread_ts}"))
        except AssertionError as exc:
            texts = [m["text"][:200] for m in self.thread_replies(channel, thread_ts)]
            raise AssertionError(f"{exc}\nbot messages in that thread: {texts}") from None

    @staticmethod
    def _brief_sent(message: SentMessage) -> dict[str, Any]:
        return FakeServer._brief_sent(message)
