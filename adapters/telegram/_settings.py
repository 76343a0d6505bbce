"""``platforms.telegram``: the Telegram adapter's settings, from config.yaml and ``TELEGRAM_*``."""

from __future__ import annotations

import re
from typing import ClassVar, Literal, Self

from pydantic import Field, SecretStr, model_validator

from adapters.settings import PlatformSettings, env_name, reveal

__all__ = ["MAKE_SECRET", "WEBHOOK_SECRET_HEADER", "WEBHOOK_SECRET_RE", "TelegramSettings"]

#: Telegram's own rule for ``secret_token`` (setWebhook).
WEBHOOK_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")
WEBHOOK_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
# Telegram's rule plus a floor against guessable secrets.
_STRONG_WEBHOOK_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{16,256}")
_TOKEN_RE = re.compile(r"[0-9]+:[A-Za-z0-9_-]+")
MAKE_SECRET = 'python3 -c "import secrets; print(secrets.token_urlsafe(32))"'


class TelegramSettings(PlatformSettings):
    """``platforms.telegram``; every key can also be set as ``TELEGRAM_<KEY>``."""

    env_prefix: ClassVar[str] = "TELEGRAM_"
    credential_key: ClassVar[str] = "token"

    token: SecretStr | None = Field(default=None, json_schema_extra=env_name("TELEGRAM_BOT_TOKEN"))
    """The bot token from @BotFather."""
    base_url: str = "https://api.telegram.org/bot"
    """Bot API root; PTB appends the token (a self-hosted Bot API server, a proxy or a fake)."""
    base_file_url: str = "https://api.telegram.org/file/bot"
    """File download root, as ``base_url``."""
    mode: Literal["polling", "webhook"] = "polling"
    """``polling`` (long-poll getUpdates) or ``webhook`` (Telegram posts to ``webhook_url``)."""
    webhook_url: str | None = None
    """Webhook mode: the public https:// URL Telegram posts to; it must reach ``webhook_path`` on the
    daemon's HTTP server (``platforms.api_server.host``/``port``), usually through a TLS proxy."""
    webhook_path: str = "/telegram/webhook"
    """Webhook mode: the path served by the daemon's HTTP server."""
    webhook_secret: SecretStr | None = None
    """Webhook mode: the secret Telegram sends with each update (16-256 of ``A-Za-z0-9_-``)."""
    require_mention: bool = True
    """In groups, answer only when mentioned, replied to or sent a command."""
    poll_timeout: int = Field(default=25, ge=1, le=300)
    """Long-poll duration of one getUpdates (seconds)."""
    watchdog_grace: float = Field(default=15.0, gt=0)
    """A getUpdates with no answer after ``poll_timeout`` + this is abandoned and polling restarts
    on a fresh connection (seconds)."""
    conflict_retries: int = Field(default=8, ge=0)
    """409 Conflicts (another poller on this token) tolerated within ``conflict_window`` before the
    adapter reports itself failed."""
    conflict_window: float = Field(default=600.0, gt=0)
    """Seconds over which ``conflict_retries`` is counted."""
    conflict_backoff: float = Field(default=1.0, gt=0)
    """First wait after a conflict (seconds); doubles up to ``conflict_backoff_max``."""
    conflict_backoff_max: float = Field(default=30.0, gt=0)
    """Longest wait after a conflict (seconds)."""
    restart_after_failures: int = Field(default=3, ge=1)
    """Stalls or network failures of getUpdates in a row before the adapter gives up this
    connection (the daemon then restarts it and health shows it)."""
    max_flood_wait: float = Field(default=900.0, gt=0)
    """Longest total flood wait (429 retry_after) honoured for one message (seconds)."""
    connection_pool_size: int = Field(default=128, ge=1)
    """HTTP connections for sends (all chats share them)."""
    request_timeout: float = Field(default=20.0, gt=0)
    """Read/write/pool timeout of one Bot API call other than getUpdates (seconds)."""
    max_upload_mb: float = Field(default=50.0, gt=0, le=2000)
    """The largest file the bot uploads (MiB; the Bot API takes 50, a local Bot API server up to 2000); a larger
    file gets a note instead."""
    dispatch_wait: float = Field(default=10.0, gt=0)
    """How long the poll loop waits for the gateway to take an update before it acknowledges it
    anyway (seconds; normally milliseconds, longer only when that chat is in a flood wait)."""

    @model_validator(mode="after")
    def _usable(self) -> Self:
        if not self.active:
            return self
        token = reveal(self.token)
        if not token:
            raise ValueError(
                "Telegram is enabled but has no bot token: set TELEGRAM_BOT_TOKEN to the token from "
                "@BotFather (or set platforms.telegram.enabled to false)"
            )
        if not _TOKEN_RE.fullmatch(token):
            raise ValueError("TELEGRAM_BOT_TOKEN does not look like a bot token (<digits>:<letters>, from @BotFather)")
        if self.mode == "webhook":
            self._check_webhook()
        return self

    def _check_webhook(self) -> None:
        secret = reveal(self.webhook_secret)
        if not secret:
            raise ValueError(
                "Telegram webhook mode requires TELEGRAM_WEBHOOK_SECRET, so that forged updates are "
                f"refused. Make one with: {MAKE_SECRET} and put it in the .env file as "
                "TELEGRAM_WEBHOOK_SECRET=<value>"
            )
        if not _STRONG_WEBHOOK_SECRET_RE.fullmatch(secret):
            raise ValueError(
                "TELEGRAM_WEBHOOK_SECRET must be 16 to 256 characters from A-Z, a-z, 0-9, _ and - "
                f"(Telegram's rule, with a minimum length). Make one with: {MAKE_SECRET}"
            )
        if not self.webhook_url or not self.webhook_url.startswith(("https://", "http://")):
            raise ValueError(
                "Telegram webhook mode requires platforms.telegram.webhook_url (or TELEGRAM_WEBHOOK_URL): "
                "the public https:// URL that reaches webhook_path on this daemon"
            )
        if not self.webhook_path.startswith("/"):
            raise ValueError("platforms.telegram.webhook_path must start with '/'")
