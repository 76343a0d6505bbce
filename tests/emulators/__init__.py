"""Wire-level fakes of the chat platforms, driven by the real client libraries in tests.

``FakeTelegram`` is a Bot API server for python-telegram-bot; Discord and Slack fakes will reuse
``FakeServer`` from ``_base``. Fixtures live in ``tests.emulators.plugin``. (Never name a module here
after the client package it fakes, e.g. ``telegram.py``: it would shadow the real one.)
"""

from ._base import Call, FakeServer, SentMessage
from .fake_telegram import (
    CONFLICT_POLLING,
    CONFLICT_WEBHOOK,
    DEFAULT_TOKEN,
    MAX_MESSAGE_LENGTH,
    SECRET_HEADER,
    BotApiError,
    EntityParseError,
    FakeTelegram,
    parse_html,
    parse_markdown_v2,
    utf16_len,
)

__all__ = [
    "CONFLICT_POLLING",
    "CONFLICT_WEBHOOK",
    "DEFAULT_TOKEN",
    "MAX_MESSAGE_LENGTH",
    "SECRET_HEADER",
    "BotApiError",
    "Call",
    "EntityParseError",
    "FakeServer",
    "FakeTelegram",
    "SentMessage",
    "parse_html",
    "parse_markdown_v2",
    "utf16_len",
]
