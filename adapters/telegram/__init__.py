"""Telegram, on python-telegram-bot: polling or webhook in, MarkdownV2 out.

``TelegramAdapter(TelegramSettings(token=...))``; the settings model is ``platforms.telegram`` of
config.yaml (with ``TELEGRAM_*`` environment variables), validated by the gateway's config loader.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

from ._settings import TelegramSettings

__all__ = ["TelegramAdapter", "TelegramSettings"]

if TYPE_CHECKING:
    from ._adapter import TelegramAdapter

# The adapter imports python-telegram-bot; the settings model alone (config validation, every CLI command)
# must not pay for that.
__getattr__ = lazy_names(__name__, {"TelegramAdapter": "adapters.telegram._adapter"})
