"""structlog set-up: JSON lines for machines, pretty output on a terminal.

A redaction processor replaces every known secret value (bot tokens, API
keys) wherever it appears in an event, so a secret that leaks into an
exception text still never reaches the log.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any

import structlog

_secrets: set[str] = set()


def register_secrets(values: Iterable[str | None]) -> None:
    for value in values:
        if value and len(value) >= 6:
            _secrets.add(value)


def redact(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, "[redacted]")
    return text


def _redact_processor(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    if not _secrets:
        return event
    for key, value in list(event.items()):
        if isinstance(value, str):
            event[key] = redact(value)
        elif isinstance(value, BaseException):
            event[key] = redact(repr(value))
    return event


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    pretty = fmt == "pretty" or (fmt == "auto" and sys.stdout.isatty())
    numeric = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(level=numeric, format="%(message)s", stream=sys.stdout, force=True)
    for noisy in ("httpx", "httpcore", "aiohttp.access", "telegram", "discord", "slack_bolt", "slack_sdk"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        _redact_processor,
    ]
    renderer: Any = structlog.dev.ConsoleRenderer() if pretty else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=False,
    )
