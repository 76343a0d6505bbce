"""Telegram, on python-telegram-bot: polling or webhook in, MarkdownV2 out.

``TelegramAdapter(TelegramSettings(token=...))``; the gateway builds the settings
from ``platforms.telegram`` in config.yaml and ``TELEGRAM_*`` environment variables.
"""

from ._adapter import TelegramAdapter
from ._inbound import MalformedUpdateError
from ._settings import TelegramSettings

__all__ = ["MalformedUpdateError", "TelegramAdapter", "TelegramSettings"]
