"""A fake Discord (REST ``/api/v10`` + gateway websocket) for end-to-end tests with the real discord.py.

Point the client at it with the product's endpoint settings: ``base_url = fake.base_url``
(``http://127.0.0.1:<port>/api/v10``) and ``gateway_url = fake.gateway_url`` (``ws://127.0.0.1:<port>/gateway``).

Wire behaviour
--------------
* REST answers carry ``Content-Type: application/json`` exactly (discord.py parses nothing else). A bad
  ``Authorization: Bot <token>`` gets 401 (discord.py: ``LoginFailure``). Errors use Discord's body
  ``{"message", "code"}``; a 429 carries ``Via`` (without it discord.py takes the 429 for a Cloudflare
  ban), ``Retry-After`` (whole seconds, rounded up), ``X-RateLimit-Scope: user`` and the body
  ``{"message", "retry_after", "global"}``.
* Per-channel rate limits (:attr:`FakeDiscord.rate_buckets`; by default message edits, about 5 per 5 s per
  channel as on Discord): every answer of such a route carries ``X-RateLimit-Limit``, ``-Remaining``,
  ``-Reset`` (epoch seconds), ``-Reset-After`` and ``-Bucket``, which discord.py reads to hold its next
  request back itself; a request over the limit gets the 429 above with the rest of the window as
  ``retry_after``. The window opens at the first request and resets ``per`` seconds later.
* Routes: ``GET /users/@me``, ``GET /oauth2/applications/@me``, ``GET /gateway[/bot]``,
  ``GET /channels/{id}``, ``GET/POST /channels/{id}/messages`` (history with ``after``/``before``/``limit``,
  newest first like Discord), ``PATCH`` and ``DELETE /channels/{id}/messages/{mid}`` (an unknown message:
  404, code 10008), ``POST /channels/{id}/typing``,
  ``POST /channels/{id}/messages/{mid}/threads`` (the thread's id is the message's id, as on Discord),
  ``POST /channels/{id}/threads``, ``POST /users/@me/channels`` (DM channel).
  Messages (new or edited) over 2000 characters or empty get 400 (code 50035 / 50006); unknown channels
  404 (10003).
* Gateway (plain JSON text frames; discord.py accepts them whatever compression it asked for): HELLO,
  IDENTIFY → READY (``session_id``, ``resume_gateway_url``, ``user``, ``application``) + GUILD_CREATE,
  heartbeat → ACK, RESUME → replay of every event after the client's sequence + RESUMED (or op 9 when the
  session is unknown). A bad token closes with 4004; asking for the message-content intent while
  :attr:`FakeDiscord.message_content_allowed` is false closes with 4014. Without that intent, guild
  messages that do not mention the bot arrive with empty ``content``, as on Discord.
* Events dispatched while no client is attached are kept in the session and replayed on RESUME.
* Attachments (``_discord_cdn``): a user's message can carry files (``attachments`` with signed CDN URLs,
  voice messages with ``IS_VOICE_MESSAGE``), served by this fake's own HTTP server; without the
  message-content intent they are stripped like ``content``.
* String select menus (``_discord_selects``): type 3 in its own row, validated; ``user_selects``.
* Components and interactions (``_discord_interactions``): buttons on the bot's messages (validated:
  5 rows of 5 buttons, ``custom_id`` 1-100 characters and unique, labels of at most 80, else 400 code
  50035 with Discord's ``errors`` tree); ``user_presses(message_id, custom_id, user=)`` sends an
  ``INTERACTION_CREATE`` (type 3, ``id`` + ``token``); ``POST /interactions/{id}/{token}/callback``
  takes response types 6, 7 and 4 once (then 400, code 40060) within ``interaction_timeout`` (3 s;
  unanswered, the press is marked ``failed``); ``presses`` records them.
* Uploads (``_discord_uploads``): the bot's message creates with files (``multipart/form-data``,
  ``payload_json`` + ``files[n]``, at most 10), the files of one request together within
  :attr:`FakeDiscord.upload_limit` (else 413, code 40005); their attachments are served by the same CDN.
  ``nonce`` + ``enforce_nonce``: the same nonce from the bot within :attr:`FakeDiscord.nonces` ``.window``
  returns the first message and creates no second one.

Test API
--------
* Inbound: ``await user_says(text, chat=None|"dm"|channel_id, user=None, thread=None, mention=False,
  reply_to=None, files=(), **extra)`` (returns the MESSAGE_CREATE payload; ``files``: ``DiscordFile``s),
  ``await dispatch(event, data)``; ``cdn`` (the files: ``requests``, ``served(id)``, ``ttl``, ``forget(id)``).
* Outbound: ``sent`` (created/edited messages: ``method, chat_id, message_id, text, reply_to, thread_id,
  params``, and ``files``: the ``Upload``s of a create with files), ``await wait_sent(...)``, ``calls``/``calls_to``/``wait_calls`` (method names such as
  ``create_message``, ``edit_message``, ``delete_message``, ``typing``, ``start_thread_from_message``).
* Controls: ``reconnect()`` (op 7), ``invalidate(resumable)`` (op 9), ``close(code)``, ``mute_acks()`` /
  ``unmute_acks()``, ``rate_limit_next(method, retry_after)``, ``rate_buckets`` (``edit_limit=`` at
  construction), ``fail_next`` (base), ``hold_connections()``
  / ``release_connections()`` (new gateway connections wait: a window in which the bot is offline),
  ``after_ready(action)`` (run ``action`` between the next READY and its GUILD_CREATE).
* State: ``connected()``, ``identifies``, ``resumes``, ``replayed`` (frames sent again on RESUME), ``sessions``,
  ``threads``, ``channel_messages(id)``.

Not emulated: zlib/zstd compression, uploads through attachment URLs (``/attachments``), slash commands and modals, members and presences,
permissions, rate limits of routes other than those in ``rate_buckets`` (use
:meth:`FakeDiscord.rate_limit_next`), the global rate limit, sharding.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dtm
import itertools
import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from ._base import FakeServer
from ._discord_cdn import IS_VOICE_MESSAGE, MAX_ATTACHMENTS, DiscordCDN, DiscordFile
from ._discord_commands import AppCommands
from ._discord_interactions import DiscordFormError, InteractionMethods, Press, check_components
from ._discord_selects import SelectMethods
from ._discord_uploads import MAX_NONCE, NonceBook, Upload, read_multipart

__all__ = [
    "DEFAULT_DISCORD_TOKEN",
    "INTENT_MESSAGE_CONTENT",
    "IS_VOICE_MESSAGE",
    "MAX_CONTENT",
    "UPLOAD_LIMIT",
    "DiscordFile",
    "FakeDiscord",
    "Press",
    "Upload",
]

DEFAULT_DISCORD_TOKEN = "TESTBOT.fake-discord.token"
MAX_CONTENT = 2000
#: what a bot may upload in one message to a server without boosts
UPLOAD_LIMIT = 10 * 1024 * 1024
INTENT_MESSAGE_CONTENT = 1 << 15
DISCORD_EPOCH_MS = 1420070400000
JSON = "application/json"

TEXT, DM, PUBLIC_THREAD = 0, 1, 11


def _iso(ts: float | None = None) -> str:
    return dtm.datetime.fromtimestamp(ts if ts is not None else time.time(), dtm.UTC).isoformat()


@dataclass
class _Session:
    id: str
    intents: int
    seq: int = 0
    #: every dispatch of this session as (seq, frame), for RESUME replays
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None
    resumable: bool = True


class _DiscordHTTPError(Exception):
    def __init__(self, status: int, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class FakeDiscord(SelectMethods, InteractionMethods, FakeServer):
    platform = "discord"

    def __init__(
        self,
        *,
        token: str = DEFAULT_DISCORD_TOKEN,
        heartbeat_interval: float = 41.25,
        message_content_allowed: bool = True,
        echo_bot_messages: bool = True,
        edit_limit: tuple[int, float] | None = (5, 5.0),
        application_id: int | None = None,
    ) -> None:
        super().__init__()
        self.token = token
        #: seconds, sent in HELLO (discord.py heartbeats at this pace)
        self.heartbeat_interval = heartbeat_interval
        #: False: IDENTIFY with the message-content intent is closed with 4014 (intent not enabled)
        self.message_content_allowed = message_content_allowed
        #: True: messages the bot sends, edits and deletes are dispatched back (MESSAGE_CREATE, _UPDATE,
        #: _DELETE), as Discord does
        self.echo_bot_messages = echo_bot_messages
        self._ids = itertools.count(1)
        self._last_snowflake = 0
        #: the bot's application (and user) id: another value is another bot account
        self.application_id = self.snowflake() if application_id is None else application_id
        self.bot = {"id": str(self.application_id), "username": "hermes", "discriminator": "0",
                    "global_name": "Hermes", "avatar": None, "bot": True, "flags": 0}
        self.user = self._make_user("alice")
        self.users: dict[str, dict[str, Any]] = {self.user["id"]: self.user}
        self.guild_id = str(self.snowflake())
        self.channels: dict[str, dict[str, Any]] = {}
        self.general = self.add_channel("general")["id"]
        self._messages: dict[str, list[dict[str, Any]]] = {}
        self._dm_by_user: dict[str, str] = {}
        self.sessions: dict[str, _Session] = {}
        self._sockets: set[web.WebSocketResponse] = set()
        self._muted: set[web.WebSocketResponse] = set()
        self._mute_all = False
        self._held = asyncio.Event()
        self._held.set()
        self._rate_limits: dict[str, list[list[Any]]] = {}
        #: per-channel rate limits, route name -> (requests, per seconds); ``edit_limit`` (None: none) is
        #: the one of message edits. Tests shrink or widen a window to provoke a 429.
        self.rate_buckets: dict[str, tuple[int, float]] = {} if edit_limit is None else {"edit_message": edit_limit}
        #: (route name, channel id) -> [window start (time.monotonic()), requests counted in it]
        self._windows: dict[tuple[str, str], list[float]] = {}
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        #: close codes the fake sent, in order
        self.close_codes: list[int] = []
        #: heartbeats received, as (time.monotonic(), acked)
        self.heartbeats: list[tuple[float, bool]] = []
        #: every dispatch frame sent again to a RESUMing client, in order
        self.replayed: list[dict[str, Any]] = []
        self._after_ready: list[Callable[[], Awaitable[Any]]] = []
        #: the files users attached, served like Discord's CDN
        self.cdn = DiscordCDN()
        #: bytes the files of one message create may add up to (413, code 40005 above)
        self.upload_limit = UPLOAD_LIMIT
        #: the enforced nonces of the bot's creates (``window``: how long one is remembered)
        self.nonces = NonceBook()
        self._press_records: dict[str, Press] = {}
        self.app_commands = AppCommands(self)  # slash commands: bulk overwrite, invocations (``_discord_commands``)

    # ------------------------------------------------------------------ ids and data

    def snowflake(self) -> int:
        """A fresh, increasing Discord snowflake (its timestamp part is now)."""
        value = max(self._last_snowflake + 1, (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22)
        self._last_snowflake = value
        return value

    def _make_user(self, name: str) -> dict[str, Any]:
        return {"id": str(self.snowflake()), "username": name, "discriminator": "0", "global_name": name.title(),
                "avatar": None, "bot": False}

    def add_user(self, name: str, *, user_id: str | None = None) -> dict[str, Any]:
        """A user; ``user_id``: a given one (the same person seen by another bot account)."""
        user = self._make_user(name)
        if user_id is not None:
            user["id"] = user_id
        self.users[user["id"]] = user
        return user

    def add_channel(self, name: str) -> dict[str, Any]:
        """A guild text channel (announced with GUILD_CREATE at the next IDENTIFY)."""
        channel = {"id": str(self.snowflake()), "type": TEXT, "guild_id": self.guild_id, "name": name,
                   "position": len(self.channels), "permission_overwrites": [], "nsfw": False, "topic": None,
                   "last_message_id": None, "rate_limit_per_user": 0, "parent_id": None, "flags": 0}
        self.channels[channel["id"]] = channel
        return channel

    def dm_channel(self, user: Mapping[str, Any] | None = None) -> dict[str, Any]:
        user = dict(user or self.user)
        cid = self._dm_by_user.get(user["id"])
        if cid is None:
            cid = str(self.snowflake())
            self._dm_by_user[user["id"]] = cid
            self.channels[cid] = {"id": cid, "type": DM, "recipients": [user], "last_message_id": None, "flags": 0}
        return self.channels[cid]

    @property
    def threads(self) -> list[dict[str, Any]]:
        return [c for c in self.channels.values() if c["type"] == PUBLIC_THREAD]

    def channel_messages(self, channel_id: str | int) -> list[dict[str, Any]]:
        return list(self._messages.get(str(channel_id), []))

    def _guild(self) -> dict[str, Any]:
        everyone = {"id": self.guild_id, "name": "@everyone", "permissions": "1071698660929", "position": 0,
                    "color": 0, "hoist": False, "managed": False, "mentionable": False, "flags": 0}
        return {
            "id": self.guild_id, "name": "Test Guild", "owner_id": self.user["id"], "member_count": 2,
            "roles": [everyone], "emojis": [], "stickers": [], "features": [], "unavailable": False,
            "channels": [c for c in self.channels.values() if c["type"] == TEXT],
            "threads": self.threads, "members": [], "presences": [], "voice_states": [],
            "stage_instances": [], "guild_scheduled_events": [], "soundboard_sounds": [],
            "large": False, "joined_at": _iso(), "afk_timeout": 300, "verification_level": 0,
            "default_message_notifications": 0, "explicit_content_filter": 0, "mfa_level": 0,
            "nsfw_level": 0, "premium_tier": 0, "preferred_locale": "en-US", "system_channel_flags": 0,
        }

    def _member(self) -> dict[str, Any]:
        return {"roles": [], "joined_at": _iso(), "deaf": False, "mute": False, "flags": 0}

    # ------------------------------------------------------------------ FakeServer hooks

    @property
    def base_url(self) -> str:
        return f"{self.endpoint()}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    def connected(self) -> bool:
        return any(s.ws is not None and not s.ws.closed for s in self.sessions.values())

    def _error_body(self, status: int, description: str | None) -> Any:
        return {"message": description or f"{status}: error", "code": 0}

    def _respond(
        self, call: Any, status: int, body: Any, headers: Mapping[str, str] | None = None
    ) -> web.Response:
        # discord.py parses a body only when Content-Type is exactly application/json (no charset).
        response = super()._respond(call, status, body, headers)
        if not isinstance(body, bytes):
            response = web.Response(status=status, body=json.dumps(body).encode(), headers={"Content-Type": JSON})
            for key, value in (headers or {}).items():
                response.headers[key] = value
        return response

    def _setup_routes(self, app: web.Application) -> None:
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/gateway-resume", self._gateway)
        self.cdn.add_routes(app)
        self.add_interaction_routes(app)
        self.app_commands.add_routes(app)
        r = "/api/v10"
        routes = [
            ("GET", "/users/@me", "get_user", self._get_me),
            ("GET", "/oauth2/applications/@me", "application_info", self._application),
            ("GET", "/gateway", "get_gateway", self._get_gateway),
            ("GET", "/gateway/bot", "get_bot_gateway", self._get_gateway),
            ("GET", "/channels/{cid}", "get_channel", self._get_channel),
            ("GET", "/channels/{cid}/messages", "logs_from", self._history),
            ("POST", "/channels/{cid}/messages", "create_message", self._create_message),
            ("PATCH", "/channels/{cid}/messages/{mid}", "edit_message", self._edit_message),
            ("DELETE", "/channels/{cid}/messages/{mid}", "delete_message", self._delete_message),
            ("POST", "/channels/{cid}/typing", "typing", self._typing),
            ("POST", "/channels/{cid}/messages/{mid}/threads", "start_thread_from_message", self._thread_from),
            ("POST", "/channels/{cid}/threads", "start_thread", self._thread_standalone),
            ("POST", "/users/@me/channels", "start_private_message", self._open_dm),
        ]
        for verb, path, name, handler in routes:
            app.router.add_route(verb, r + path, self._rest(name, handler))

    async def _on_stop(self) -> None:
        self._held.set()
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close(code=1001)

    # ------------------------------------------------------------------ REST

    def _rest(self, name: str, handler: Any) -> Any:
        async def route(request: web.Request) -> web.StreamResponse:
            params: dict[str, Any] = dict(request.query)
            if request.content_type == "multipart/form-data":
                try:
                    params.update(await read_multipart(request))
                except ValueError:
                    return self._respond(None, 400, {"message": "400: Bad Request", "code": 50109})
            elif request.can_read_body:
                with contextlib.suppress(ValueError):
                    body = await request.json()
                    if isinstance(body, dict):
                        params.update(body)
            params.update(request.match_info)
            call = self._record_call(name, params, http_method=request.method, path=request.path,
                                     headers={k: v for k, v in request.headers.items() if k.lower() != "authorization"})
            if request.headers.get("Authorization") != f"Bot {self.token}":
                return self._respond(call, 401, {"message": "401: Unauthorized", "code": 0})
            failure = self._take_failure(name)
            if failure is not None:
                return self._failure_response(call, failure)
            waits = self._rate_limits.get(name)
            if waits and waits[0][0] > 0:
                waits[0][0] -= 1
            elif waits:
                return self._rate_limited(call, waits.pop(0)[1], {})
            limits, wait = self._count(name, params)
            if wait is not None:
                return self._rate_limited(call, wait, limits)
            try:
                status, result = await handler(params)
            except _DiscordHTTPError as exc:
                return self._respond(call, exc.status, {"message": exc.message, "code": exc.code}, limits)
            except DiscordFormError as exc:
                return self._respond(call, 400, exc.body(), limits)
            if status == 204:
                call.status = 204
                self._notify()
                return web.Response(status=204, headers=limits)
            return self._respond(call, status, result, limits)

        return route

    def _count(self, name: str, params: Mapping[str, Any]) -> tuple[dict[str, str], float | None]:
        """Count a request against its route's window in its channel: the ``X-RateLimit-*`` headers of the
        answer, and the rest of the window when it is used up (None: the request may go ahead)."""
        bucket = self.rate_buckets.get(name)
        if bucket is None or "cid" not in params:
            return {}, None
        limit, per = bucket
        now = time.monotonic()
        key = (name, str(params["cid"]))
        window = self._windows.get(key)
        if window is None or now >= window[0] + per:
            window = self._windows[key] = [now, 0]
        allowed = window[1] < limit
        if allowed:
            window[1] += 1
        reset_after = math.ceil(max(0.0, window[0] + per - now) * 1000) / 1000  # never earlier than the reset
        headers = {"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(limit - int(window[1])),
                   "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}", "X-RateLimit-Reset-After": f"{reset_after:.3f}",
                   "X-RateLimit-Bucket": f"fake-{name}"}
        return headers, None if allowed else reset_after

    def _rate_limited(self, call: Any, retry_after: float, limits: Mapping[str, str]) -> web.Response:
        # ``Via`` marks the 429 as Discord's own (discord.py takes one without it for a Cloudflare ban).
        headers = {**limits, "Via": "1.1 google", "Retry-After": str(math.ceil(retry_after)), "X-RateLimit-Scope": "user"}
        return self._respond(call, 429, {"message": "You are being rate limited.", "retry_after": retry_after,
                                         "global": False}, headers)

    def _channel(self, cid: Any) -> dict[str, Any]:
        channel = self.channels.get(str(cid))
        if channel is None:
            raise _DiscordHTTPError(404, "Unknown Channel", 10003)
        return channel

    async def _get_me(self, p: dict[str, Any]) -> tuple[int, Any]:
        return 200, self.bot

    async def _application(self, p: dict[str, Any]) -> tuple[int, Any]:
        return 200, {"id": str(self.application_id), "name": "Hermes", "description": "", "icon": None,
                     "bot_public": False, "bot_require_code_grant": False, "owner": self.user, "verify_key": "0" * 64,
                     "flags": 0, "bot": self.bot}

    async def _get_gateway(self, p: dict[str, Any]) -> tuple[int, Any]:
        return 200, {"url": self.gateway_url, "shards": 1,
                     "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}}

    async def _get_channel(self, p: dict[str, Any]) -> tuple[int, Any]:
        return 200, self._channel(p["cid"])

    async def _history(self, p: dict[str, Any]) -> tuple[int, Any]:
        self._channel(p["cid"])
        msgs = sorted(self._messages.get(p["cid"], []), key=lambda m: int(m["id"]))
        limit = max(1, min(int(p.get("limit") or 50), 100))
        if p.get("after"):
            after = int(p["after"])
            picked = [m for m in msgs if int(m["id"]) > after][:limit]
        else:
            before = int(p["before"]) if p.get("before") else None
            picked = [m for m in msgs if before is None or int(m["id"]) < before][-limit:]
        return 200, list(reversed(picked))

    async def _create_message(self, p: dict[str, Any]) -> tuple[int, Any]:
        channel = self._channel(p["cid"])
        content = p.get("content")
        files: list[Upload] = p.get("_files") or []
        self._check_upload(files)
        nonce = p.get("nonce")
        if nonce is not None and (not isinstance(nonce, str | int) or len(str(nonce)) > MAX_NONCE):
            raise _DiscordHTTPError(400, "Invalid Form Body\nIn nonce: Must be 25 or fewer in length.", 50035)
        if nonce is not None and p.get("enforce_nonce"):
            earlier = self.nonces.earlier(self.bot["id"], str(nonce))
            if earlier is not None:
                return 200, earlier
        components = check_components(p["components"]) if p.get("components") is not None else []
        if files and content is None:
            content = ""
        if not isinstance(content, str) or not (content or files):
            raise _DiscordHTTPError(400, "Cannot send an empty message", 50006)
        if len(content) > MAX_CONTENT:
            raise _DiscordHTTPError(400, "Invalid Form Body\nIn content: Must be 2000 or fewer in length.", 50035)
        ref = p.get("message_reference") or None
        if ref is not None and ref.get("fail_if_not_exists", True):
            target = str(ref.get("channel_id") or p["cid"])
            if not any(m["id"] == str(ref.get("message_id")) for m in self._messages.get(target, [])):
                raise _DiscordHTTPError(400, "Invalid Form Body\nIn message_reference: Unknown message", 50035)
        msg = self.message_payload(channel, self.bot, content, reference=ref)
        if nonce is not None:
            msg["nonce"] = nonce
        msg["components"] = components
        msg["attachments"] = [
            self.cdn.attachment(self.endpoint(), channel["id"], str(self.snowflake()),
                                DiscordFile(f.filename, f.data, f.content_type)) for f in files]
        self._store(msg)
        if nonce is not None and p.get("enforce_nonce"):
            self.nonces.note(self.bot["id"], str(nonce), msg)
        self._record_sent({"method": "create_message", "chat_id": p["cid"], "message_id": msg["id"], "text": content,
                           "reply_to": str(ref["message_id"]) if ref else None,
                           "thread_id": p["cid"] if channel["type"] == PUBLIC_THREAD else None, "params": p,
                           "files": list(files)})
        if self.echo_bot_messages:
            await self.dispatch("MESSAGE_CREATE", msg)
        return 200, msg

    def _check_upload(self, files: list[Upload]) -> None:
        if len(files) > MAX_ATTACHMENTS:
            raise _DiscordHTTPError(400, f"Invalid Form Body\nIn files: Must be {MAX_ATTACHMENTS} or fewer in length.",
                                    50035)
        if sum(len(f.data) for f in files) > self.upload_limit:
            raise _DiscordHTTPError(413, "Request entity too large", 40005)

    def _message(self, cid: str, mid: str) -> dict[str, Any]:
        self._channel(cid)
        for msg in self._messages.get(cid, []):
            if msg["id"] == mid:
                return msg
        raise _DiscordHTTPError(404, "Unknown Message", 10008)

    async def _edit_message(self, p: dict[str, Any]) -> tuple[int, Any]:
        content = p.get("content")
        if isinstance(content, str) and len(content) > MAX_CONTENT:
            raise _DiscordHTTPError(400, "Invalid Form Body\nIn content: Must be 2000 or fewer in length.", 50035)
        msg = self._message(p["cid"], p["mid"])
        if msg["author"]["id"] != self.bot["id"]:
            raise _DiscordHTTPError(403, "Cannot edit a message authored by another user", 50005)
        if p.get("components") is not None:
            msg["components"] = check_components(p["components"])
        if "content" in p:
            if not content and not msg["embeds"] and not msg["attachments"]:
                raise _DiscordHTTPError(400, "Cannot send an empty message", 50006)
            msg["content"] = content
        msg["edited_timestamp"] = _iso()
        self._record_sent({"method": "edit_message", "chat_id": p["cid"], "message_id": p["mid"],
                           "text": msg["content"], "reply_to": None, "thread_id": None, "params": p})
        if self.echo_bot_messages:
            await self.dispatch("MESSAGE_UPDATE", msg)
        return 200, msg

    async def _delete_message(self, p: dict[str, Any]) -> tuple[int, Any]:
        msg = self._message(p["cid"], p["mid"])
        self._messages[p["cid"]].remove(msg)
        for item in msg.get("attachments") or ():
            self.cdn.forget(item["id"])
        if self.echo_bot_messages:
            await self.dispatch("MESSAGE_DELETE", {"id": msg["id"], "channel_id": msg["channel_id"],
                                                   **({"guild_id": msg["guild_id"]} if msg.get("guild_id") else {})})
        return 204, None

    async def _typing(self, p: dict[str, Any]) -> tuple[int, Any]:
        self._channel(p["cid"])
        return 204, None

    def _new_thread(self, parent: dict[str, Any], tid: str, name: str, owner: str) -> dict[str, Any]:
        if parent["type"] != TEXT:
            raise _DiscordHTTPError(400, "Cannot execute action on this channel type", 50024)
        if not isinstance(name, str) or not 1 <= len(name) <= 100:
            raise _DiscordHTTPError(400, "Invalid Form Body\nIn name: Must be between 1 and 100 in length.", 50035)
        if tid in self.channels:
            raise _DiscordHTTPError(400, "A thread has already been created for this message", 160004)
        thread = {"id": tid, "type": PUBLIC_THREAD, "guild_id": self.guild_id, "parent_id": parent["id"],
                  "owner_id": owner, "name": name, "last_message_id": None, "rate_limit_per_user": 0,
                  "message_count": 0, "member_count": 1, "flags": 0, "total_message_sent": 0,
                  "thread_metadata": {"archived": False, "auto_archive_duration": 1440, "locked": False,
                                      "archive_timestamp": _iso(), "create_timestamp": _iso()}}
        self.channels[tid] = thread
        return thread

    async def _thread_from(self, p: dict[str, Any]) -> tuple[int, Any]:
        parent = self._channel(p["cid"])
        if not any(m["id"] == p["mid"] for m in self._messages.get(p["cid"], [])):
            raise _DiscordHTTPError(404, "Unknown Message", 10008)
        thread = self._new_thread(parent, p["mid"], p.get("name"), self.bot["id"])
        await self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return 201, thread

    async def _thread_standalone(self, p: dict[str, Any]) -> tuple[int, Any]:
        parent = self._channel(p["cid"])
        thread = self._new_thread(parent, str(self.snowflake()), p.get("name"), self.bot["id"])
        await self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return 201, thread

    async def _open_dm(self, p: dict[str, Any]) -> tuple[int, Any]:
        user = self.users.get(str(p.get("recipient_id")))
        if user is None:
            raise _DiscordHTTPError(400, "Invalid Recipient(s)", 50033)
        return 200, self.dm_channel(user)

    def rate_limit_next(
        self, method: str = "create_message", retry_after: float = 0.1, *, times: int = 1, skip: int = 0
    ) -> None:
        """After ``skip`` more successful calls, the next ``times`` calls of ``method`` get 429 (with ``Via``,
        so discord.py waits ``retry_after`` and retries)."""
        queue = self._rate_limits.setdefault(method, [])
        queue.append([skip, retry_after])
        queue.extend([0, retry_after] for _ in range(times - 1))

    # ------------------------------------------------------------------ messages

    def message_payload(self, channel: dict[str, Any], author: Mapping[str, Any], content: str, *,
                         mentions: list[dict[str, Any]] | None = None,
                         reference: Mapping[str, Any] | None = None) -> dict[str, Any]:
        mid = str(self.snowflake())
        msg: dict[str, Any] = {
            "id": mid, "channel_id": channel["id"], "author": dict(author), "content": content,
            "timestamp": _iso(), "edited_timestamp": None, "tts": False, "mention_everyone": False,
            "mentions": mentions or [], "mention_roles": [], "attachments": [], "embeds": [], "pinned": False,
            "type": 19 if reference else 0, "flags": 0, "components": [],
        }
        if channel.get("guild_id"):
            msg["guild_id"] = channel["guild_id"]
            msg["member"] = self._member()
        if reference:
            ref_id = str(reference.get("message_id"))
            msg["message_reference"] = {"message_id": ref_id, "channel_id": str(reference.get("channel_id") or
                                                                                 channel["id"])}
            original = next((m for m in self._messages.get(channel["id"], []) if m["id"] == ref_id), None)
            if original is not None:
                msg["referenced_message"] = {k: v for k, v in original.items() if k != "referenced_message"}
        return msg

    def _store(self, msg: dict[str, Any]) -> None:
        self._messages.setdefault(msg["channel_id"], []).append(msg)
        channel = self.channels.get(msg["channel_id"])
        if channel is not None:
            channel["last_message_id"] = msg["id"]

    async def user_says(
        self,
        text: str,
        *,
        chat: Any = None,
        user: Any = None,
        thread: Any = None,
        mention: bool = False,
        reply_to: Any = None,
        dispatch: bool = True,
        files: Sequence[DiscordFile] = (),
        **extra: Any,
    ) -> dict[str, Any]:
        """A user posts ``text``. ``chat``: None/"dm" → the user's DM, "general" or a channel id → that
        channel; ``thread``: a thread id (posts there). ``mention``: prefix ``<@bot>``; ``reply_to``: a message
        id in the same channel. ``files``: attachments (a voice message is one ``voice`` file and no text, as
        on Discord). ``extra`` is merged into the payload. ``dispatch=False``: only the channel history
        gets it (posted where no gateway event reaches the bot). Returns the MESSAGE_CREATE payload."""
        author = dict(user or self.user)
        if thread is not None:
            channel = self._channel(thread)
        elif chat is None or chat == "dm":
            channel = self.dm_channel(author)
        elif chat == "general":
            channel = self.channels[self.general]
        else:
            channel = self._channel(chat)
        mentions: list[dict[str, Any]] = []
        if mention:
            text = f"<@{self.bot['id']}> {text}"
            mentions.append({**self.bot, "member": self._member()})
        reference = {"message_id": str(reply_to), "channel_id": channel["id"]} if reply_to is not None else None
        msg = self.message_payload(channel, author, text, mentions=mentions, reference=reference)
        if files:
            self._attach(msg, files)
        msg.update(extra)
        self._store(msg)
        if dispatch:
            await self.dispatch("MESSAGE_CREATE", msg)
        return msg

    def _attach(self, msg: dict[str, Any], files: Sequence[DiscordFile]) -> None:
        if len(files) > MAX_ATTACHMENTS:
            raise ValueError(f"a Discord message carries at most {MAX_ATTACHMENTS} attachments")
        if any(f.voice for f in files):
            if len(files) != 1 or msg["content"]:
                raise ValueError("a Discord voice message is one audio file and no text")
            msg["flags"] |= IS_VOICE_MESSAGE
        msg["attachments"] = [self.cdn.attachment(self.endpoint(), msg["channel_id"], str(self.snowflake()), f)
                              for f in files]

    # ------------------------------------------------------------------ gateway

    def _current(self) -> _Session | None:
        live = [s for s in self.sessions.values() if s.resumable]
        return live[-1] if live else None

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Dispatch ``event`` on the current session (kept for a RESUME if no client is attached now)."""
        session = self._current()
        if session is None:
            return
        payload = data
        if event == "MESSAGE_CREATE" and not session.intents & INTENT_MESSAGE_CONTENT and data.get("guild_id"):
            if not any(str(m.get("id")) == self.bot["id"] for m in data.get("mentions") or []):
                payload = {**data, "content": "", "attachments": [], "embeds": []}
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": payload}
        session.events.append((session.seq, frame))
        await self._send(session.ws, frame)

    async def _send(self, ws: web.WebSocketResponse | None, frame: dict[str, Any]) -> None:
        if ws is None or ws.closed:
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.send_str(json.dumps(frame))

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        await self._held.wait()
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        self._sockets.add(ws)
        try:
            await self._send(ws, {"op": 10, "s": None, "t": None,
                                  "d": {"heartbeat_interval": int(self.heartbeat_interval * 1000)}})
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                try:
                    packet = json.loads(frame.data)
                except ValueError:
                    await ws.close(code=4002, message=b"Error while decoding payload.")
                    break
                await self._on_packet(ws, packet)
        finally:
            self._sockets.discard(ws)
            self._muted.discard(ws)
            for session in self.sessions.values():
                if session.ws is ws:
                    session.ws = None
            self._notify()
        return ws

    async def _close(self, ws: web.WebSocketResponse, code: int, reason: str) -> None:
        self.close_codes.append(code)
        await ws.close(code=code, message=reason.encode())

    async def _on_packet(self, ws: web.WebSocketResponse, packet: dict[str, Any]) -> None:
        op, data = packet.get("op"), packet.get("d")
        if op == 1:
            acked = not (self._mute_all or ws in self._muted)
            self.heartbeats.append((time.monotonic(), acked))
            if acked:
                await self._send(ws, {"op": 11, "s": None, "t": None, "d": None})
            self._notify()
        elif op == 2:
            await self._identify(ws, data or {})
        elif op == 6:
            await self._resume(ws, data or {})

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        self.identifies.append({k: v for k, v in data.items() if k != "token"})
        if data.get("token") != self.token:
            await self._close(ws, 4004, "Authentication failed.")
            return
        intents = int(data.get("intents") or 0)
        if intents & INTENT_MESSAGE_CONTENT and not self.message_content_allowed:
            await self._close(ws, 4014, "Disallowed intent(s).")
            return
        for old in self.sessions.values():
            old.resumable = False
        session = _Session(id=f"session-{next(self._ids)}", intents=intents, ws=ws)
        self.sessions[session.id] = session
        ready = {"v": 10, "user": self.bot, "guilds": [{"id": self.guild_id, "unavailable": True}],
                 "session_id": session.id, "resume_gateway_url": f"ws://127.0.0.1:{self.port}/gateway-resume",
                 "application": {"id": str(self.application_id), "flags": 0}, "private_channels": [],
                 "relationships": [], "presences": [], "session_type": "normal"}
        await self.dispatch("READY", ready)
        hooks, self._after_ready = self._after_ready, []
        for hook in hooks:
            await hook()
        await self.dispatch("GUILD_CREATE", self._guild())
        self._notify()

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        self.resumes.append({k: v for k, v in data.items() if k != "token"})
        session = self.sessions.get(str(data.get("session_id")))
        if data.get("token") != self.token:
            await self._close(ws, 4004, "Authentication failed.")
            return
        if session is None or not session.resumable:
            await self._send(ws, {"op": 9, "s": None, "t": None, "d": False})
            return
        session.ws = ws
        after = int(data.get("seq") or 0)
        for seq, frame in session.events:
            if seq > after:
                self.replayed.append(frame)
                await self._send(ws, frame)
        session.seq += 1
        await self._send(ws, {"op": 0, "t": "RESUMED", "s": session.seq, "d": {}})
        session.events.append((session.seq, {"op": 0, "t": "RESUMED", "s": session.seq, "d": {}}))
        self._notify()

    # ------------------------------------------------------------------ controls

    def _live_ws(self) -> web.WebSocketResponse:
        session = self._current()
        if session is None or session.ws is None or session.ws.closed:
            raise AssertionError("no client is connected to the fake Discord gateway")
        return session.ws

    async def reconnect(self) -> None:
        """Op 7 RECONNECT: the client closes and RESUMEs."""
        await self._send(self._live_ws(), {"op": 7, "s": None, "t": None, "d": None})

    async def invalidate(self, resumable: bool = False) -> None:
        """Op 9 INVALID_SESSION; not resumable → the session is dropped and the client must IDENTIFY."""
        ws = self._live_ws()
        if not resumable:
            session = self._current()
            if session is not None:
                session.resumable = False
        await self._send(ws, {"op": 9, "s": None, "t": None, "d": resumable})

    async def close(self, code: int = 4000) -> None:
        """Close the client's connection with ``code`` (4000: resumable; 4004, 4014: fatal)."""
        await self._close(self._live_ws(), code, "closed by the test")

    async def drop(self) -> None:
        """Drop the connection without a close frame (like a 1006 abnormal closure)."""
        ws = self._live_ws()
        transport = ws._req.transport if ws._req is not None else None  # a test-only hard drop
        if transport is not None:
            transport.close()

    def mute_acks(self, *, all_connections: bool = False) -> None:
        """Stop acknowledging heartbeats: on the current connection only (a new one acks again), or on all."""
        if all_connections:
            self._mute_all = True
        else:
            self._muted.add(self._live_ws())

    def unmute_acks(self) -> None:
        self._mute_all = False
        self._muted.clear()

    def after_ready(self, action: Callable[[], Awaitable[Any]]) -> None:
        """Run ``action`` (e.g. a ``user_says``) at the next IDENTIFY, right after READY and before
        GUILD_CREATE: an event the client gets before its guilds, long before ``on_ready``."""
        self._after_ready.append(action)

    def hold_connections(self) -> None:
        """New gateway connections wait (the bot is offline) until :meth:`release_connections`."""
        self._held.clear()

    def release_connections(self) -> None:
        self._held.set()
