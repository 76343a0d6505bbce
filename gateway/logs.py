"""structlog set-up: JSON lines for machines, pretty output on a terminal.

A redaction processor replaces every known secret value (bot tokens, API
keys) wherever it appears in an event — nested in structures, inside
exceptions, in records from libraries that use the standard ``logging``
module — so a secret that leaks into some text still never reaches the log.
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


def forget_secrets() -> None:
    _secrets.clear()


def redact(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, "[redacted]")
    return text


def _clean(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, bool | int | float) or value is None:
        return value
    if depth < 6:
        if isinstance(value, dict):
            return {_clean(k, depth + 1): _clean(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [_clean(v, depth + 1) for v in value]
    # Anything else is rendered by repr(); redact that text instead.
    return redact(repr(value))


def _redact_processor(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    if not _secrets:
        return event
    for key, value in list(event.items()):
        event[key] = _clean(value)
    return event


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    pretty = fmt == "pretty" or (fmt == "auto" and sys.stdout.isatty())
    numeric = getattr(logging, level.upper(), logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        _redact_processor,
    ]
    renderer: Any = structlog.dev.ConsoleRenderer() if pretty else structlog.processors.JSONRenderer()
    # Records of libraries that log through the standard module go through the
    # same redaction and rendering as ours.
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    for noisy in ("httpx", "httpcore", "aiohttp.access", "telegram", "discord", "slack_bolt", "slack_sdk"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=False,
    )
