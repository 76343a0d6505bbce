"""structlog set-up: JSON lines for machines, pretty output on a terminal.

A redaction processor replaces every known secret value (bot tokens, API
keys) wherever it appears in an event — nested in structures, inside
exceptions, in records from libraries that use the standard ``logging``
module — so a secret that leaks into some text still never reaches the log.
Secrets of 6 characters or more are redacted wherever they appear; shorter ones
only where they stand as a whole token (see ``_TOKEN_CHAR``).

Under systemd, JSON lines start with the syslog priority the journald way
(``<3>{...}`` for an error, sd-daemon(3)): journald reads that prefix from a
service's stdout, strips it and files the line under that priority, so
``journalctl -p err`` finds errors. A ``PRIORITY`` field inside the JSON would
do nothing: journald does not parse JSON on a stream. The prefix is written
only when stdout is the journal (``$JOURNAL_STREAM``), so Docker, files and
pipes get plain JSON lines; the pretty console format never has it.

Repeated identical lines are dropped beyond a few a minute (``RepeatLimit``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any, TextIO

import structlog

_secrets: set[str] = set()
#: at this length and above a secret is redacted wherever it appears, even inside a longer word
_SUBSTRING_MIN = 6
#: what a short secret must not touch on either side to count as the whole token: a letter, a digit,
#: "_" or "-" (so "abc" is redacted in "key=abc&x" or "token abc." but not in "abcdef" or "my-abc-1")
_TOKEN_CHAR = r"[\w-]"
_pattern: re.Pattern[str] | None = None


def register_secrets(values: Iterable[str | None]) -> None:
    global _pattern
    for value in values:
        if value and value.strip():
            _secrets.add(value)
    _pattern = _compile(_secrets)


def forget_secrets() -> None:
    global _pattern
    _secrets.clear()
    _pattern = None


def _compile(secrets: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for all secrets, longest first: a secret that holds a shorter one is
    redacted whole, never cut open by the shorter one's replacement first."""
    parts = []
    for secret in sorted(secrets, key=lambda s: (-len(s), s)):
        escaped = re.escape(secret)
        if len(secret) < _SUBSTRING_MIN:
            # A short secret as a substring would eat ordinary words ("abc" in "abcdef"):
            # only where it stands as a token of its own.
            escaped = f"(?<!{_TOKEN_CHAR}){escaped}(?!{_TOKEN_CHAR})"
        parts.append(escaped)
    return re.compile("|".join(parts)) if parts else None


def redact(text: str) -> str:
    return text if _pattern is None else _pattern.sub("[redacted]", text)


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
    if _pattern is None:
        return event
    for key, value in list(event.items()):
        event[key] = _clean(value)
    return event


#: syslog priorities (sd-daemon(3)) for the level names that add_log_level writes
_PRIORITY = {"debug": 7, "info": 6, "warning": 4, "warn": 4, "error": 3, "exception": 3, "critical": 2}


def _on_journal(stream: TextIO) -> bool:
    """Whether ``stream`` is connected to journald: systemd puts its device:inode in $JOURNAL_STREAM."""
    dev, _, ino = os.environ.get("JOURNAL_STREAM", "").partition(":")
    try:
        st = os.fstat(stream.fileno())
        return (st.st_dev, st.st_ino) == (int(dev), int(ino))
    except (ValueError, OSError):  # no JOURNAL_STREAM, or a stream without a file descriptor
        return False


def _with_priority(renderer: Any) -> Any:
    def render(logger: Any, name: str, event: MutableMapping[str, Any]) -> str:
        priority = _PRIORITY.get(str(event.get("level", "")).lower(), 6)
        return f"<{priority}>{renderer(logger, name, event)}"

    return render


def configure_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Log to ``stream`` (stdout by default)."""
    stream = stream or sys.stdout
    pretty = fmt == "pretty" or (fmt == "auto" and stream.isatty())
    numeric = getattr(logging, level.upper(), logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        _redact_processor,
    ]
    renderer: Any = structlog.dev.ConsoleRenderer() if pretty else structlog.processors.JSONRenderer()
    if not pretty and _on_journal(stream):
        renderer = _with_priority(renderer)
    # Records of libraries that log through the standard module go through the
    # same redaction and rendering as ours.
    handler = logging.StreamHandler(stream)
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
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    install_repeat_limit()


# ------------------------------------------------------------ repeated lines

#: identical lines let through per window; the rest are counted, not written
REPEAT_BURST = 10
REPEAT_WINDOW = 60.0


@dataclass
class _Window:
    start: float
    count: int = 1
    dropped: int = 0


class RepeatLimit:
    """Lets ``burst`` identical lines through per ``window`` seconds and drops the rest; the next line
    of that kind let through carries how many were dropped. A flood of one error (asyncio's
    ``socket.accept() out of system resource`` when descriptors run out, a refused connection per
    client) then costs a few lines a minute instead of the disk. Thread-safe (the writer thread
    logs too); remembers at most ``max_keys`` kinds of line, forgetting the oldest."""

    def __init__(self, burst: int = REPEAT_BURST, window: float = REPEAT_WINDOW, *, max_keys: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst, self.window, self._max_keys, self._clock = burst, window, max_keys, clock
        self._seen: OrderedDict[Hashable, _Window] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, key: Hashable) -> int | None:
        """None: drop this line. Otherwise write it, noting that many lines of its kind were dropped."""
        now = self._clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or now - seen.start >= self.window:
                self._seen[key] = _Window(now)
                self._seen.move_to_end(key)
                if len(self._seen) > self._max_keys:
                    self._seen.popitem(last=False)
                return seen.dropped if seen is not None else 0
            seen.count += 1
            if seen.count > self.burst:
                seen.dropped += 1
                return None
            dropped, seen.dropped = seen.dropped, 0
            return dropped


_repeats = RepeatLimit()


def _limit_repeats(_: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor for our own events (last before rendering: the key is the whole line)."""
    key = (method, repr(sorted((k, repr(v)) for k, v in event.items() if k != "timestamp")))
    dropped = _repeats.admit(key)
    if dropped is None:
        raise structlog.DropEvent
    if dropped:
        event["repeats_dropped"] = dropped
    return event


class _RepeatFilter(logging.Filter):
    """The same for records of libraries that log through the standard module (asyncio, aiohttp).
    A line is the message's first line: asyncio puts what happened there and the varying details
    (a handle's due time, a socket's fd) on the lines after it."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        first = record.getMessage().partition("\n")[0]
        dropped = _repeats.admit((record.name, record.levelno, first, repr(exc)))
        if dropped is None:
            return False
        if dropped:
            record.msg = f"{record.msg} [{dropped} identical lines dropped]"
        return True


def install_repeat_limit(limit: RepeatLimit | None = None) -> None:
    """Drop repeated identical lines, ours and the libraries' (after ``configure_logging``, which
    calls it; again with a ``limit`` of other bounds or clock)."""
    global _repeats
    _repeats = limit or RepeatLimit()
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _RepeatFilter) for f in handler.filters):
            handler.addFilter(_RepeatFilter())
    processors = list(structlog.get_config()["processors"])
    if _limit_repeats not in processors:
        processors.insert(max(0, len(processors) - 1), _limit_repeats)  # before the renderer
        structlog.configure(processors=processors)
