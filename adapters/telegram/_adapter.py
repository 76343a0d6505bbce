"""The Telegram adapter, on python-telegram-bot's ``Bot`` (no ``Application``).

Intake runs our own loop over raw ``getUpdates`` results rather than PTB's
``Updater``, because the gateway needs control PTB does not give:

- **Malformed updates** are parsed one at a time; one that fails is logged
  (update id and error type, never content) and acknowledged with the rest of
  its batch. PTB's Updater parses the batch as a whole and retries it forever.
- **409 Conflict** (another process polls this token) is retried with
  exponential backoff; past ``conflict_retries`` conflicts within
  ``conflict_window`` seconds (in a row, or interleaved with successes, as
  when two daemons take turns) the adapter raises ``FatalAdapterError`` and
  health says "failed". A conflict after polling was healthy first ends this
  connection, so health shows "restarting" rather than "connected" while the
  bot is deaf.
- **A hung getUpdates** (no answer within ``poll_timeout + watchdog_grace``;
  only getUpdates answers count, never sends) is abandoned and polling
  restarts on a fresh connection; after ``restart_after_failures`` in a row
  the connection is given up and the runner restarts it.
- **Acknowledgement**: the offset moves past an update only in the next
  getUpdates, after the router has taken the update (or ``dispatch_wait``
  ran out). A crash before that redelivers it, and the router's dedupe on
  ``update:<update_id>`` makes that one turn.

``ready`` is set once getMe, deleteWebhook and a first (short) getUpdates
succeeded; in webhook mode once getMe and setWebhook did.

Outbound: replies are split by ``split`` to 4096 UTF-16 units *of the
escaped MarkdownV2 text* (an additive upper bound, see ``_format``), sent as
MarkdownV2, and sent again as plain text if Telegram cannot parse them. One
delivery per chat at a time (a per-chat lock): a 429 waits out ``retry_after``
holding only that chat's lock, so other chats go on, and the chunk is then sent
again (Telegram did not apply it, so this cannot duplicate). A send that times
out is not repeated: it may have arrived, and a duplicate is worse than the
ledger's "failed".
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dtm
import hmac
import json
import os
import time
import warnings
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from aiohttp import web
from telegram import Bot, ReplyParameters, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from .._dispatch import ChatOrderedDispatch
from .._split import split_text
from ..base import (
    Adapter,
    AdapterError,
    ChatInfo,
    ChatType,
    FatalAdapterError,
    OutboundMessage,
    SendResult,
)
from ..settings import reveal
from ._format import markdown_v2_budget, to_markdown_v2
from ._inbound import PLATFORM, BotIdentity, clean_text, to_inbound
from ._request import AiohttpRequest
from ._settings import WEBHOOK_SECRET_HEADER, TelegramSettings

__all__ = ["TelegramAdapter"]

log = structlog.get_logger("hermes.telegram")

# PTB 22 warns on every RetryAfter unless time periods are timedeltas (its documented opt-in);
# this adapter reads them either way (see _retry_seconds).
os.environ.setdefault("PTB_TIMEDELTA", "true")

T = TypeVar("T")

#: Update kinds we ask for; everything else is never sent to us.
ALLOWED_UPDATES = ["message"]
POLL_LIMIT = 100
#: Connect retries for a send whose connection was never made (so it cannot have arrived).
CONNECT_RETRIES = 3
STOP_WAIT = 5.0
FINAL_ACK_TIMEOUT = 2.0
TOPIC_NAME_MAX = 128
#: Shortest pause before polling again after a batch that moved nothing forward.
MIN_POLL_PAUSE = 0.01


class _Stalled(Exception):
    pass


class _Stopped(Exception):
    pass


class _Bot(Bot):
    """PTB's ``Bot`` plus getUpdates returning the raw JSON, parsed by us one update at a time."""

    __slots__ = ()

    async def get_raw_updates(self, *, offset: int | None, long_poll: int, read_timeout: float) -> Any:
        data: dict[str, Any] = {
            "offset": offset,
            "timeout": long_poll,
            "limit": POLL_LIMIT,
            "allowed_updates": ALLOWED_UPDATES,
        }
        return await self._post("getUpdates", data, read_timeout=read_timeout)

    async def send_raw_message(self, chat: int | str, text: str, *, parse_mode: str | None,
                               thread: int | None, reply: ReplyParameters | None) -> int:
        """sendMessage returning only the new message's id: PTB's ``send_message`` builds a whole
        ``Message`` from the answer, a tenth of the gateway's CPU per reply, for one field we use."""
        data: dict[str, Any] = {"chat_id": chat, "text": text, "parse_mode": parse_mode,
                                "message_thread_id": thread, "reply_parameters": reply}
        result = await self._post("sendMessage", data)
        return int(result["message_id"])


@dataclass
class _Target:
    """Where one send goes; adjusted when Telegram says part of it is gone."""

    chat: int | str
    thread: int | None = None
    reply: ReplyParameters | None = None


def _chat_ref(chat_id: str) -> int | str:
    """Telegram chat ids are integers; ``@channelname`` stays a string."""
    try:
        return int(chat_id)
    except ValueError:
        return chat_id


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _retry_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 warns that the attribute will become a timedelta
        warnings.simplefilter("ignore")
        value = exc.retry_after
    if isinstance(value, dtm.timedelta):
        return max(0.0, value.total_seconds())
    return max(0.0, float(value))


def _is_parse_error(exc: BadRequest) -> bool:
    text = exc.message.lower()
    return "can't parse" in text or "entit" in text or "can't find end" in text


def _never_sent(exc: NetworkError) -> bool:
    """The request provably never left: a failed connect, or a client closed by a reconnect."""
    # Our request layer (``_request``) names aiohttp's connect failures; PTB's own message says
    # "is not initialized" for a client closed by a reconnect.
    text = exc.message
    return any(s in text for s in ("aiohttp.ClientConnector", "aiohttp.ConnectionTimeoutError", "is not initialized"))


class _ChatLocks:
    """One lock per chat, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, chat_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(chat_id, (asyncio.Lock(), 0))
        self._locks[chat_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[chat_id]
            if users <= 1:
                del self._locks[chat_id]
            else:
                self._locks[chat_id] = (lock, users - 1)


class TelegramAdapter(Adapter):
    platform = PLATFORM
    max_message_length = 4096  # UTF-16 code units
    supports_recovery = True

    def __init__(self, settings: TelegramSettings) -> None:
        super().__init__()
        self.settings = settings
        self._bot: _Bot | None = None
        self._init_lock = asyncio.Lock()
        self._me: BotIdentity | None = None
        self._stopping = asyncio.Event()
        self._loop_done: asyncio.Event | None = None
        #: next getUpdates offset: one past the newest update handed to the router
        self._offset: int | None = None
        self._acked: int | None = None
        self._conflicts = 0
        self._conflict_times: deque[float] = deque()
        self._failures = 0
        self._dispatches = ChatOrderedDispatch(PLATFORM, self.dispatch)
        self._send_locks = _ChatLocks()
        self._sends = 0
        self._sends_idle = asyncio.Event()
        self._sends_idle.set()
        self._flood_until: dict[str, float] = {}
        self._forum: dict[str, bool] = {}
        self._last_quote: dict[str, str | None] = {}
        #: observability for tests and /status: how often the watchdog restarted polling
        self.stall_restarts = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def bot_username(self) -> str | None:
        return self._me.username if self._me else None

    @property
    def health(self) -> str:
        """Inbound liveness for /readyz: "degraded" while getUpdates keeps stalling or failing."""
        if not self.ready.is_set():
            return "starting"
        return "degraded" if self._failures else "live"

    @property
    def health_reason(self) -> str | None:
        if self.ready.is_set() and self._failures:
            return f"getUpdates stalled or failed {self._failures} time(s) in a row; polling restarted"
        return None

    def _make_bot(self) -> _Bot:
        s = self.settings
        return _Bot(
            token=reveal(s.token),
            base_url=s.base_url,
            base_file_url=s.base_file_url,
            request=AiohttpRequest(
                connection_pool_size=s.connection_pool_size,
                read_timeout=s.request_timeout,
                write_timeout=s.request_timeout,
                connect_timeout=10.0,
                pool_timeout=s.request_timeout,
            ),
            # Two: a poll abandoned by the watchdog may still hold one until it is torn down.
            get_updates_request=AiohttpRequest(connection_pool_size=2, connect_timeout=10.0, pool_timeout=10.0),
        )

    async def _ensure_bot(self) -> _Bot:
        """The initialized bot (getMe done); re-initialized after a disconnect."""
        async with self._init_lock:
            if self._bot is None:
                self._bot = self._make_bot()
            bot = self._bot
            try:
                await bot.initialize()
            except InvalidToken:
                # PTB's message quotes the token; ours does not.
                raise FatalAdapterError(
                    "Telegram rejected the bot token (401/404 on getMe). Check TELEGRAM_BOT_TOKEN "
                    "(from @BotFather) and platforms.telegram.base_url."
                ) from None
            if self._me is None:
                me = bot.bot
                self._me = BotIdentity(id=me.id, username=me.username)
            return bot

    async def connect(self) -> None:
        self._stopping.clear()
        done = asyncio.Event()
        self._loop_done = done
        try:
            bot = await self._ensure_bot()
            if self.settings.mode == "webhook":
                await self._serve_webhook(bot)
            else:
                await self._poll(bot)
        finally:
            done.set()

    async def disconnect(self) -> None:
        self._stopping.set()
        self.ready.clear()
        done = self._loop_done
        if done is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), STOP_WAIT)
        await self._dispatches.wait(STOP_WAIT)
        bot = self._bot
        if bot is None:
            return
        if self.settings.mode == "polling" and self._offset is not None and self._offset != self._acked:
            # Acknowledge what the router has taken, so a restart does not fetch it again.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    bot.get_raw_updates(offset=self._offset, long_poll=0, read_timeout=FINAL_ACK_TIMEOUT),
                    FINAL_ACK_TIMEOUT,
                )
                self._acked = self._offset
        # Replies already on their way finish first (a reconnect after a crash must not cut them off).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._sends_idle.wait(), STOP_WAIT)
        with contextlib.suppress(Exception):
            await bot.shutdown()

    # ------------------------------------------------------------------- polling

    async def _poll(self, bot: _Bot) -> None:
        s = self.settings
        await bot.delete_webhook(drop_pending_updates=False)
        idle_backoff = 0.0
        last_stuck: str | None = None
        while not self._stopping.is_set():
            # The first call is a short poll: "ready" must not wait a whole long poll.
            timeout = s.poll_timeout if self.ready.is_set() else 0
            offset = self._offset
            try:
                raw = await self._fetch(bot, offset, timeout)
            except _Stopped:
                break
            except _Stalled:
                self.stall_restarts += 1
                self._give_up_after_failure(
                    f"getUpdates gave no answer within {timeout + s.watchdog_grace:g}s",
                    event="telegram.poll_stalled",
                )
                continue  # at once, on a fresh connection: the stall already took its time
            except Conflict as exc:
                await self._on_conflict(bot, exc)
                continue
            except RetryAfter as exc:
                await self._pause(_retry_seconds(exc))
                continue
            except InvalidToken:
                raise FatalAdapterError(
                    "Telegram no longer accepts the bot token (TELEGRAM_BOT_TOKEN was revoked or changed)."
                ) from None
            except TelegramError as exc:
                self._give_up_after_failure(f"getUpdates failed: {exc.message}", event="telegram.poll_failed")
                await self._pause(min(2.0 ** self._failures, 30.0))
                continue
            self._acked = offset
            self._failures = 0
            self._conflicts = 0
            if not self.ready.is_set():
                self.ready.set()
                log.info("telegram.polling", bot=self.bot_username, poll_timeout=s.poll_timeout)
            progressed = await self._take_batch(bot, raw)
            if progressed or not raw:
                idle_backoff, last_stuck = 0.0, None
                continue
            # Updates came back but none could be acknowledged (no usable update_id), so the
            # server may send the very same batch again: never a spin loop. The same batch
            # again doubles the pause (to 30 s), and its warning is logged only then.
            stuck = repr(raw)
            if stuck == last_stuck:
                idle_backoff = min(max(idle_backoff * 2, 0.5), 30.0)
                log.warning("telegram.batch_repeated", updates=len(raw), retry_in=idle_backoff)
            else:
                idle_backoff = MIN_POLL_PAUSE
            last_stuck = stuck
            await self._pause(idle_backoff)

    async def _fetch(self, bot: _Bot, offset: int | None, long_poll: int) -> Any:
        """One getUpdates, abandoned when it outlives the watchdog bound or the adapter stops."""
        deadline = long_poll + self.settings.watchdog_grace
        fetch = asyncio.ensure_future(
            bot.get_raw_updates(offset=offset, long_poll=long_poll, read_timeout=deadline + 5.0)
        )
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            done, _ = await asyncio.wait({fetch, stop}, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not fetch.done():
                fetch.cancel()
                await asyncio.wait({fetch})
        if fetch in done:
            return fetch.result()
        if stop in done:
            raise _Stopped
        raise _Stalled

    def _give_up_after_failure(self, reason: str, *, event: str) -> None:
        self._failures += 1
        log.warning(event, reason=reason, failures=self._failures, limit=self.settings.restart_after_failures)
        if self._failures >= self.settings.restart_after_failures:
            self._failures = 0
            raise AdapterError(f"{reason} ({self.settings.restart_after_failures} times in a row)")

    async def _on_conflict(self, bot: _Bot, exc: Conflict) -> None:
        s = self.settings
        now = time.monotonic()
        self._conflicts += 1  # in a row: sets the backoff
        # Counted over a window, not only in a row: two pollers on one token take turns, and
        # each one's successes between conflicts must not hide that from both of them.
        self._conflict_times.append(now)
        while self._conflict_times and self._conflict_times[0] < now - s.conflict_window:
            self._conflict_times.popleft()
        recent = len(self._conflict_times)
        if recent > s.conflict_retries:
            self._conflicts = 0
            self._conflict_times.clear()
            log.error("telegram.conflict_fatal", conflicts=recent, window=s.conflict_window, error=exc.message)
            raise FatalAdapterError(
                f"Telegram reports another getUpdates consumer for this bot token ({recent} conflicts within "
                f"{s.conflict_window:g}s: {exc.message}). Another gateway or bot process is using "
                "TELEGRAM_BOT_TOKEN; stop it (or give this gateway its own bot), then restart."
            )
        delay = min(s.conflict_backoff * 2 ** (self._conflicts - 1), s.conflict_backoff_max)
        log.warning("telegram.conflict", conflicts=recent, limit=s.conflict_retries, retry_in=delay,
                    error=exc.message)
        if "webhook" in exc.message.lower():
            with contextlib.suppress(TelegramError):
                await bot.delete_webhook(drop_pending_updates=False)
        if self.ready.is_set():
            # We were receiving and now are not: say so (health leaves "connected"); the
            # runner reconnects, and the conflict count goes on from here.
            raise AdapterError(f"polling conflict: {exc.message}")
        await self._pause(delay)

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake at once when the adapter stops."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _take_batch(self, bot: _Bot, raw: Any) -> bool:
        """Hand every update to the router; True if the offset moved."""
        if not isinstance(raw, list):
            log.warning("telegram.batch_malformed", type=type(raw).__name__)
            return False
        progressed = False
        tasks: list[asyncio.Task[None]] = []
        for item in raw:
            update_id = item.get("update_id") if isinstance(item, dict) else None
            if not isinstance(update_id, int) or isinstance(update_id, bool):
                log.warning("telegram.update_malformed", update_id=None, error="no integer update_id")
                continue
            if self._offset is None or update_id >= self._offset:
                self._offset = update_id + 1
                progressed = True
            task = self._take_update(bot, update_id, item)
            if task is not None:
                tasks.append(task)
        if tasks:
            await asyncio.wait(tasks, timeout=self.settings.dispatch_wait)
        return progressed

    def _take_update(self, bot: _Bot, update_id: int, item: dict[str, Any]) -> asyncio.Task[None] | None:
        """Parse one update and schedule its dispatch; None when it is malformed or not for us."""
        me = self._me
        if me is None:  # pragma: no cover - set by _ensure_bot before any intake
            return None
        try:
            update = Update.de_json(item, bot)
            message = to_inbound(update, me, require_mention=self.settings.require_mention)
        except Exception as exc:
            # Never the payload: it is a user's message.
            log.warning("telegram.update_malformed", update_id=update_id, error=type(exc).__name__)
            return None
        if message is None:
            log.debug("telegram.update_ignored", update_id=update_id, kinds=sorted(k for k in item if k != "update_id"))
            return None
        if update.message is not None and isinstance(update.message.chat.is_forum, bool):
            self._forum[message.chat_id] = update.message.chat.is_forum
        return self._dispatches.schedule(message)

    # ------------------------------------------------------------------- webhook

    def add_routes(self, app: web.Application) -> None:
        """The webhook route on the daemon's own HTTP server (webhook mode only)."""
        if self.settings.mode == "webhook":
            app.router.add_post(self.settings.webhook_path, self._webhook)

    async def _serve_webhook(self, bot: _Bot) -> None:
        s = self.settings
        if not s.webhook_url or not s.webhook_secret:
            raise FatalAdapterError("webhook mode needs platforms.telegram.webhook_url and TELEGRAM_WEBHOOK_SECRET")
        await bot.set_webhook(
            url=s.webhook_url,
            secret_token=reveal(s.webhook_secret),
            allowed_updates=ALLOWED_UPDATES,
            drop_pending_updates=False,
        )
        self.ready.set()
        log.info("telegram.webhook", bot=self.bot_username, path=s.webhook_path)
        await self._stopping.wait()

    async def _webhook(self, request: web.Request) -> web.StreamResponse:
        secret = reveal(self.settings.webhook_secret)
        given = request.headers.get(WEBHOOK_SECRET_HEADER)
        if not secret or given is None:
            log.warning("telegram.webhook_rejected", reason="missing secret header", remote=request.remote)
            return web.json_response({"ok": False, "error": "missing secret token"}, status=401)
        if not hmac.compare_digest(given.encode("utf-8", "replace"), secret.encode()):
            log.warning("telegram.webhook_rejected", reason="wrong secret", remote=request.remote)
            return web.json_response({"ok": False, "error": "wrong secret token"}, status=403)
        bot = self._bot
        if bot is None or not self.ready.is_set():
            # Telegram keeps the update and delivers it again later.
            return web.json_response({"ok": False, "error": "not ready"}, status=503)
        try:
            item = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError):
            item = None
        update_id = item.get("update_id") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(update_id, int) or isinstance(update_id, bool):
            # Authenticated but unusable: acknowledge it, or Telegram would send it again forever.
            log.warning("telegram.update_malformed", update_id=None, error="webhook body is not an update")
            return web.json_response({"ok": True})
        task = self._take_update(bot, update_id, item)
        if task is not None:
            await asyncio.wait({task}, timeout=self.settings.dispatch_wait)
        return web.json_response({"ok": True})

    # ------------------------------------------------------------------- output

    def split(self, text: str) -> list[str]:
        # Measured in UTF-16 units of the escaped text: every chunk fits once converted.
        return split_text(text, self.max_message_length, markdown_v2_budget)

    async def send(self, message: OutboundMessage) -> SendResult:
        text = clean_text(message.text)
        if not text.strip():
            return SendResult()  # Telegram refuses empty messages; nothing visible is lost
        with self._sending():
            bot = await self._ensure_bot()
            async with self._send_locks.hold(message.chat_id):
                target = await self._target(bot, message.chat_id, message.thread_id, message.reply_to)
                sent = await self._send_text(bot, message.chat_id, target, text)
                self._last_quote[message.chat_id] = message.reply_to
        return SendResult((str(sent),))

    @contextlib.contextmanager
    def _sending(self) -> Iterator[None]:
        """Counts sends in flight, so a disconnect lets them finish before closing the client."""
        self._sends += 1
        self._sends_idle.clear()
        try:
            yield
        finally:
            self._sends -= 1
            if self._sends == 0:
                self._sends_idle.set()

    async def _target(self, bot: _Bot, chat_id: str, thread_id: str | None, reply_to: str | None) -> _Target:
        chat = _chat_ref(chat_id)
        target = _Target(chat)
        thread = _int_or_none(thread_id)
        if thread is not None:
            if await self._is_forum(bot, chat_id):
                target.thread = thread
            else:
                # A "thread" in a chat without topics is a seed message (create_thread): reply under it.
                target.reply = ReplyParameters(message_id=thread, allow_sending_without_reply=True)
                return target
        reply = _int_or_none(reply_to)
        private = isinstance(chat, int) and chat > 0
        # In groups the answer quotes the question (several people talk there); continuation
        # chunks of the same answer do not quote it again.
        if reply is not None and not private and self._last_quote.get(chat_id) != reply_to:
            target.reply = ReplyParameters(message_id=reply, allow_sending_without_reply=True)
        return target

    async def _send_text(self, bot: _Bot, chat_id: str, target: _Target, text: str) -> int:
        async def formatted(t: _Target) -> int:
            return await bot.send_raw_message(t.chat, to_markdown_v2(text), parse_mode=ParseMode.MARKDOWN_V2,
                                              thread=t.thread, reply=t.reply)

        async def plain(t: _Target) -> int:
            return await bot.send_raw_message(t.chat, text, parse_mode=None, thread=t.thread, reply=t.reply)

        try:
            return await self._call(chat_id, target, formatted)
        except BadRequest as exc:
            if not _is_parse_error(exc):
                raise
            log.warning("telegram.markdown_rejected", chat_id=chat_id, error=exc.message)
        return await self._call(chat_id, target, plain)

    async def _call(self, chat_id: str, target: _Target, request: Callable[[_Target], Awaitable[T]]) -> T:
        """One Bot API call for a chat, through flood waits and a vanished topic or reply target."""
        waited = 0.0
        connect_failures = 0
        migrated = False
        while True:
            await self._ensure_bot()  # a reconnect may have closed the client in between
            try:
                return await request(target)
            except RetryAfter as exc:
                delay = _retry_seconds(exc)
                waited += delay
                if waited > self.settings.max_flood_wait:
                    log.error("telegram.flood_wait_exceeded", chat_id=chat_id, waited=waited)
                    raise
                self._flood_until[chat_id] = time.monotonic() + delay
                log.warning("telegram.flood_wait", chat_id=chat_id, retry_after=delay)
                await asyncio.sleep(delay)
            except ChatMigrated as exc:
                if migrated:
                    raise
                migrated = True
                log.warning("telegram.chat_migrated", chat_id=chat_id, new_chat_id=exc.new_chat_id)
                target.chat = exc.new_chat_id
            except BadRequest as exc:
                text = exc.message.lower()
                if target.thread is not None and "thread not found" in text:
                    log.warning("telegram.topic_gone", chat_id=chat_id, thread_id=target.thread)
                    target.thread = None
                elif target.reply is not None and "repl" in text and "not found" in text:
                    target.reply = None
                else:
                    raise
            except TimedOut:
                raise  # it may have arrived: never send twice
            except NetworkError as exc:
                if not _never_sent(exc) or connect_failures >= CONNECT_RETRIES:
                    raise
                connect_failures += 1
                await asyncio.sleep(0.5 * 2**connect_failures)

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        if self._flood_until.get(chat_id, 0.0) > time.monotonic():
            return  # a chat in flood wait gets nothing more, typing least of all
        bot = await self._ensure_bot()
        thread = _int_or_none(thread_id)
        if thread is not None and not await self._is_forum(bot, chat_id):
            thread = None
        try:
            await bot.send_chat_action(_chat_ref(chat_id), ChatAction.TYPING, message_thread_id=thread)
        except RetryAfter as exc:
            self._flood_until[chat_id] = time.monotonic() + _retry_seconds(exc)
        except TelegramError as exc:
            log.debug("telegram.typing_failed", chat_id=chat_id, error=exc.message)

    async def _is_forum(self, bot: _Bot, chat_id: str) -> bool:
        known = self._forum.get(chat_id)
        if known is not None:
            return known
        try:
            chat = await bot.get_chat(_chat_ref(chat_id))
        except TelegramError as exc:
            # A thread id we did not see arrive came from create_thread or the ledger: a topic.
            log.warning("telegram.get_chat_failed", chat_id=chat_id, error=exc.message)
            return True
        forum = chat.is_forum is True
        self._forum[chat_id] = forum
        return forum

    async def get_chat_info(self, chat_id: str) -> ChatInfo:
        bot = await self._ensure_bot()
        try:
            chat = await bot.get_chat(_chat_ref(chat_id))
        except (Forbidden, BadRequest) as exc:
            raise AdapterError(f"Telegram chat {chat_id} is not reachable: {exc.message}") from None
        self._forum[chat_id] = chat.is_forum is True
        kind = ChatType.DM if chat.type == "private" else ChatType.GROUP
        name = chat.title or chat.full_name or chat.username
        return ChatInfo(chat_id=chat_id, chat_type=kind, name=name)

    async def handoff_refusal(self, chat_id: str, chat_type: ChatType, thread_id: str | None) -> str | None:
        """A group without topics cannot hold a handed-off conversation of its own: its thread
        would be a seed message, and later messages there do not carry the seed's id."""
        if chat_type is not ChatType.GROUP or thread_id is not None:
            return None
        if await self._is_forum(await self._ensure_bot(), chat_id):
            return None
        return ("the Telegram home channel is a group without topics, so a handed-off session would have no "
                "place of its own there. Turn on Topics for that group (making it a forum) and send /sethome "
                "there again, or send /sethome in your private chat with the bot")

    async def create_thread(self, chat_id: str, name: str, *, from_message_id: str | None = None) -> str | None:
        """A forum topic where the chat is a forum; otherwise a seed message whose id threads later replies."""
        with self._sending():
            return await self._create_thread(chat_id, name, from_message_id)

    async def _create_thread(self, chat_id: str, name: str, from_message_id: str | None) -> str:
        bot = await self._ensure_bot()
        title = " ".join(clean_text(name).split())[:TOPIC_NAME_MAX] or "Conversation"
        async with self._send_locks.hold(chat_id):
            target = _Target(_chat_ref(chat_id))
            if await self._is_forum(bot, chat_id):

                async def topic(t: _Target) -> int:
                    created = await bot.create_forum_topic(t.chat, title)
                    return int(created.message_thread_id)

                thread = await self._call(chat_id, target, topic)
                log.info("telegram.topic_created", chat_id=chat_id, thread_id=thread)
                return str(thread)
            reply = _int_or_none(from_message_id)
            if reply is not None:
                target.reply = ReplyParameters(message_id=reply, allow_sending_without_reply=True)

            async def seed(t: _Target) -> int:
                sent = await bot.send_message(t.chat, f"🧵 {title}", reply_parameters=t.reply)
                return int(sent.message_id)

            seed_id = await self._call(chat_id, target, seed)
            self._last_quote[chat_id] = None
            return str(seed_id)
