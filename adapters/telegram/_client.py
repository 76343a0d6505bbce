"""The connection to the Bot API: python-telegram-bot's ``Bot`` on our aiohttp request layer.

``BotConnection.ensure`` builds the bot once, initializes it (getMe) and remembers
who the bot is; after ``shutdown`` (a disconnect) the next ``ensure`` initializes
it again. A token Telegram refuses is a ``FatalAdapterError`` whose message never
quotes the token (PTB's does).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dtm
import os
import warnings
from typing import Any

from telegram import Bot, InlineKeyboardMarkup, ReplyParameters
from telegram.error import InvalidToken, RetryAfter

from ..base import FatalAdapterError
from ..settings import reveal
from ._inbound import BotIdentity
from ._request import AiohttpRequest
from ._settings import TelegramSettings

__all__ = ["ALLOWED_UPDATES", "BotConnection", "TelegramBot", "retry_seconds"]

# PTB 22 warns on every RetryAfter unless time periods are timedeltas (its documented opt-in);
# this adapter reads them either way (see retry_seconds).
os.environ.setdefault("PTB_TIMEDELTA", "true")

#: Update kinds we ask for; everything else is never sent to us (a button press is a callback_query).
ALLOWED_UPDATES = ["message", "callback_query"]
POLL_LIMIT = 100


class TelegramBot(Bot):
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
                               thread: int | None, reply: ReplyParameters | None,
                               markup: InlineKeyboardMarkup | None = None) -> int:
        """sendMessage returning only the new message's id: PTB's ``send_message`` builds a whole
        ``Message`` from the answer, a tenth of the gateway's CPU per reply, for one field we use.
        ``markup``: buttons under the message (an approval question's)."""
        data: dict[str, Any] = {"chat_id": chat, "text": text, "parse_mode": parse_mode,
                                "message_thread_id": thread, "reply_parameters": reply, "reply_markup": markup}
        result = await self._post("sendMessage", data)
        return int(result["message_id"])

    async def edit_raw_message_text(self, chat: int | str, message_id: int, text: str, *,
                                    parse_mode: str | None) -> None:
        """editMessageText without building a ``Message`` from the answer (a stream edits often).
        Without ``reply_markup``, which also takes a message's buttons away (a settled approval)."""
        data: dict[str, Any] = {"chat_id": chat, "message_id": message_id, "text": text, "parse_mode": parse_mode}
        await self._post("editMessageText", data)


def retry_seconds(exc: RetryAfter) -> float:
    """How long a 429 asks us to wait, whichever type this PTB gives it."""
    with warnings.catch_warnings():  # PTB 22 warns that the attribute will become a timedelta
        warnings.simplefilter("ignore")
        value = exc.retry_after
    if isinstance(value, dtm.timedelta):
        return max(0.0, value.total_seconds())
    return max(0.0, float(value))


class BotConnection:
    """The one bot of an adapter, initialized on first use and again after a disconnect."""

    def __init__(self, settings: TelegramSettings) -> None:
        self._settings = settings
        self._bot: TelegramBot | None = None
        self._init_lock = asyncio.Lock()
        #: who the bot is (from the first getMe); None until then
        self.me: BotIdentity | None = None

    @property
    def bot(self) -> TelegramBot | None:
        """The bot, if one was ever built (it may be shut down)."""
        return self._bot

    @property
    def username(self) -> str | None:
        return self.me.username if self.me else None

    def _make_bot(self) -> TelegramBot:
        s = self._settings
        return TelegramBot(
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

    async def ensure(self) -> TelegramBot:
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
            if self.me is None:
                me = bot.bot
                self.me = BotIdentity(id=me.id, username=me.username)
            return bot

    async def shutdown(self) -> None:
        """Close the bot's HTTP clients; the next ``ensure`` opens them again."""
        bot = self._bot
        if bot is not None:
            with contextlib.suppress(Exception):
                await bot.shutdown()
