"""What the Telegram adapter needs to know, already validated by the gateway's config."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["WEBHOOK_SECRET_HEADER", "WEBHOOK_SECRET_RE", "TelegramSettings"]

#: Telegram's own rule for ``secret_token`` (setWebhook).
WEBHOOK_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")
WEBHOOK_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


@dataclass(frozen=True)
class TelegramSettings:
    token: str = field(repr=False)
    #: Bot API root; PTB appends the token (a ``{token}`` placeholder also works).
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str = "https://api.telegram.org/file/bot"
    mode: Literal["polling", "webhook"] = "polling"
    #: Public URL Telegram posts updates to (webhook mode); it must reach ``webhook_path``
    #: on the daemon's HTTP server (usually through a TLS reverse proxy).
    webhook_url: str | None = None
    webhook_path: str = "/telegram/webhook"
    webhook_secret: str | None = field(default=None, repr=False)
    #: In groups, answer only when mentioned, replied to or sent a command.
    require_mention: bool = True
    #: Long-poll duration of one getUpdates (seconds).
    poll_timeout: int = 25
    #: A getUpdates with no answer after ``poll_timeout + watchdog_grace`` seconds is
    #: abandoned and polling restarts on a fresh connection.
    watchdog_grace: float = 15.0
    #: 409 Conflicts (another poller on this token) tolerated within ``conflict_window``
    #: seconds before the adapter reports itself failed.
    conflict_retries: int = 8
    conflict_window: float = 600.0
    #: First wait after a conflict; doubles up to ``conflict_backoff_max``.
    conflict_backoff: float = 1.0
    conflict_backoff_max: float = 30.0
    #: Stalls or network failures of getUpdates in a row before the adapter gives up
    #: this connection (the runner then restarts it and health shows it).
    restart_after_failures: int = 3
    #: The longest total flood wait (429 retry_after) honoured for one message.
    max_flood_wait: float = 900.0
    #: HTTP connections for sends (all chats share them).
    connection_pool_size: int = 128
    #: Read/write/pool timeout of one Bot API call other than getUpdates.
    request_timeout: float = 20.0
    #: How long the poll loop waits for the router to take an update before it
    #: acknowledges it anyway (normally milliseconds; longer only when a notice
    #: to that chat is in a flood wait).
    dispatch_wait: float = 10.0
