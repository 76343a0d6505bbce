"""Discord's rate limits made visible to a reply stream, instead of slept through inside discord.py.

discord.py handles limits itself, for every request: it reads the
``X-RateLimit-*`` headers of each answer and, once a bucket is used up, sleeps
until it resets (after the request that used the last one, and before the
next); a 429 it sleeps out for ``retry_after`` and sends the request again.
Only a wait longer than ``max_ratelimit_wait`` (never under 30 s) raises. That
suits a reply sent once; a growing answer would instead stall in an
``update`` that shows stale text when it finally goes out. So a stream's
requests go through :meth:`RateWindows.surfaced`:

- the answers of every message request are watched through an aiohttp trace
  (discord.py's public ``http_trace`` option), and the state of each
  (method, channel) window is kept;
- before a stream's request, a window with at most one request left raises
  ``RateLimitedError`` with the time to its reset: the request that used the
  last one would make discord.py sleep until the reset before returning;
- a 429 to a stream's request raises ``RateLimitedError`` with Discord's
  ``retry_after`` from inside the trace, before discord.py sees it, so it
  neither sleeps nor sends the stale text again.

Other requests (``Adapter.send``) keep discord.py's waiting. A stream thus
uses at most all but one request of each window; two streams in one channel
at once may still meet discord.py's wait on the last one.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from types import SimpleNamespace

import aiohttp

from ..base import RateLimitedError

__all__ = ["RateWindows"]

#: set while a stream's request runs (the trace runs in the requesting task, so it sees it)
_SURFACE: ContextVar[bool] = ContextVar("discord_surface_rate_limits", default=False)
_MESSAGES = re.compile(r"/channels/(\d+)/messages(?:/\d+)?$")
#: requests a stream leaves unused in a window (see the module docstring)
_RESERVE = 1
#: windows kept before the ones already reset are dropped (one per channel and method in use)
_KEEP = 1024


@dataclass
class _Window:
    remaining: int
    resets_at: float  # time.monotonic()


class RateWindows:
    """What Discord said about the message routes' windows, per (HTTP method, channel id)."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, str], _Window] = {}

    def trace_config(self) -> aiohttp.TraceConfig:
        """A trace for the next discord.py client (a client's session freezes the one it gets)."""
        trace = aiohttp.TraceConfig()
        trace.on_request_end.append(self._on_request_end)
        return trace

    @contextlib.contextmanager
    def surfaced(self, method: str, channel_id: str) -> Iterator[None]:
        """Run a stream's request: ``RateLimitedError`` instead of any wait for a rate limit."""
        window = self._windows.get((method, channel_id))
        if window is not None:
            wait = window.resets_at - time.monotonic()
            if wait <= 0:
                del self._windows[(method, channel_id)]
            elif window.remaining <= _RESERVE:
                raise RateLimitedError(f"Discord's rate limit for this channel resets in {wait:.1f}s", wait)
        token = _SURFACE.set(True)
        try:
            yield
        finally:
            _SURFACE.reset(token)

    async def _on_request_end(self, session: aiohttp.ClientSession, context: SimpleNamespace,
                              params: aiohttp.TraceRequestEndParams) -> None:
        found = _MESSAGES.search(params.url.path)
        if found is None:
            return
        key = (params.method.upper(), found.group(1))
        response = params.response
        now = time.monotonic()
        if len(self._windows) >= _KEEP:
            self._windows = {k: w for k, w in self._windows.items() if w.resets_at > now}
        if response.status == 429:
            retry_after = await _retry_after(response, read_body=_SURFACE.get())
            self._windows[key] = _Window(0, now + retry_after)
            if _SURFACE.get():
                raise RateLimitedError(f"Discord rate limit: wait {retry_after:.1f}s", retry_after)
            return
        remaining, reset_after = _header(response, "X-RateLimit-Remaining"), _header(response, "X-RateLimit-Reset-After")
        if remaining is not None and reset_after is not None:
            self._windows[key] = _Window(int(remaining), now + reset_after)


def _header(response: aiohttp.ClientResponse, name: str) -> float | None:
    try:
        return float(response.headers[name])
    except (KeyError, ValueError):
        return None


async def _retry_after(response: aiohttp.ClientResponse, *, read_body: bool) -> float:
    """Discord's ``retry_after`` (the body's, to the millisecond; else the headers')."""
    if read_body:
        with contextlib.suppress(aiohttp.ClientError, ValueError, UnicodeDecodeError):
            body = json.loads(await response.read())
            value = body.get("retry_after") if isinstance(body, dict) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                return max(0.0, float(value))
    for name in ("X-RateLimit-Reset-After", "Retry-After"):
        value = _header(response, name)
        if value is not None:
            return max(0.0, value)
    return 1.0
