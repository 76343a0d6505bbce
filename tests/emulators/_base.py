"""Common machinery of the wire-level platform fakes: an aiohttp server on 127.0.0.1, call and outbox
recording, one-shot failure injection and timed waits.

A platform fake subclasses :class:`FakeServer`, adds its routes in :meth:`FakeServer._setup_routes`,
records each API call with :meth:`FakeServer._record_call` and each outbound (bot-sent) message with
:meth:`FakeServer._record_sent`, and calls :meth:`FakeServer._notify` whenever state changes that a
waiter may care about. Every public wait has a timeout; ``stop()`` wakes every parked request, so a
test's teardown never waits for a long poll to run out.
"""

from __future__ import annotations

import abc
import asyncio
import json
import pprint
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

__all__ = ["Call", "FakeServer", "SentMessage"]

#: One outbound message as recorded in :attr:`FakeServer.sent` (a plain dict; keys are per platform,
#: but always include ``method``, ``chat_id``, ``text``, ``thread_id``, ``reply_to`` and ``time``).
SentMessage = dict[str, Any]


@dataclass
class Call:
    """One API call as the fake received it.

    ``params`` are decoded (ids as ``int``, known JSON fields parsed); ``time`` is ``time.monotonic()``
    at arrival; ``status`` is the HTTP status the fake answered with (``None`` while still pending,
    e.g. a parked long poll); ``response`` is the decoded body it answered with.
    """

    method: str
    params: dict[str, Any]
    time: float
    http_method: str = "POST"
    path: str = ""
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    #: The decoded response body the fake answered with (None while pending).
    response: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class _Failure:
    status: int
    body: Any
    headers: Mapping[str, str]


class FakeServer(abc.ABC):
    """Base of every platform fake. Use ``async with Fake() as fake:`` or ``await fake.start()``/``stop()``."""

    #: Name used in messages ("telegram", "discord", ...).
    platform: str = "fake"

    def __init__(self, *, poll_window: float = 1.0, shutdown_timeout: float = 0.5) -> None:
        #: ``connected()`` stays true this many seconds after the last successful poll was answered.
        self.poll_window = poll_window
        self._shutdown_timeout = shutdown_timeout
        #: Every API call, in arrival order.
        self.calls: list[Call] = []
        #: Every message the bot sent (or edited) successfully, in order.
        self.sent: list[SentMessage] = []
        self._failures: dict[str, deque[_Failure]] = {}
        self._changed: asyncio.Event | None = None
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> Self:
        """Start listening on a free 127.0.0.1 port. Returns ``self``."""
        if self._runner is not None:
            raise RuntimeError(f"{type(self).__name__} is already started")
        self._closing = False
        app = web.Application(client_max_size=64 * 1024 * 1024)
        self._setup_routes(app)
        runner = web.AppRunner(app, shutdown_timeout=self._shutdown_timeout, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._port = runner.addresses[0][1]
        await self._on_start()
        return self

    async def stop(self) -> None:
        """Stop the server. Parked requests are released at once (they answer and return)."""
        self._closing = True
        self._notify()
        # Let parked handlers wake up and answer before the server goes away (bounded).
        await self._wait(lambda: not self._parked_requests(), 0.25, closing_ok=True)
        await self._on_stop()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def started(self) -> bool:
        return self._runner is not None

    @property
    def closing(self) -> bool:
        """True once ``stop()`` was called."""
        return self._closing

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._port

    def endpoint(self) -> str:
        """Base URL of the fake, e.g. ``http://127.0.0.1:45678`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    # ----------------------------------------------------------- client state

    @abc.abstractmethod
    def connected(self) -> bool:
        """Whether a client is connected right now (platform-specific meaning)."""

    async def wait_connected(self, timeout: float = 5.0) -> None:
        """Wait until :meth:`connected` is true; AssertionError after ``timeout`` seconds."""
        await self.wait_for(self.connected, timeout, what=f"a client to connect to the fake {self.platform}")

    # ----------------------------------------------------------------- inbound

    @abc.abstractmethod
    async def user_says(
        self,
        text: str,
        *,
        chat: Any = None,
        user: Any = None,
        thread: Any = None,
        **kw: Any,
    ) -> dict[str, Any]:
        """Inject a user message; returns the platform payload (update/event) that was injected."""

    # ----------------------------------------------------------------- waiting

    async def wait_for(
        self,
        predicate: Callable[[], Any],
        timeout: float = 5.0,
        *,
        what: str = "a condition",
    ) -> Any:
        """Wait until ``predicate()`` is truthy and return its value.

        The predicate is re-checked whenever the fake's state changes (and at least every 50 ms, so
        predicates over outside state work too). Raises AssertionError after ``timeout`` seconds or
        when the fake stops first.
        """
        value = await self._wait(predicate, timeout, poll=0.05)
        if not value:
            state = "the fake was stopped" if self._closing else f"timed out after {timeout:g}s"
            raise AssertionError(f"{state} waiting for {what}\n{self._describe_calls()}")
        return value

    async def wait_sent(
        self,
        n: int = 1,
        timeout: float = 5.0,
        match: Callable[[SentMessage], bool] | None = None,
    ) -> list[SentMessage]:
        """Wait until at least ``n`` messages in :attr:`sent` satisfy ``match`` (all, if None).

        Returns every matching message (in order). On timeout raises AssertionError that lists what
        *was* sent, and the failed calls, so the test output says what went wrong.
        """

        def matching() -> list[SentMessage]:
            return [m for m in self.sent if match is None or match(m)]

        if await self._wait(lambda: len(matching()) >= n, timeout, poll=0.05):
            return matching()
        got = matching()
        state = "the fake was stopped" if self._closing else f"timed out after {timeout:g}s"
        label = f" matching {getattr(match, '__name__', match)!s}" if match is not None else ""
        sent = pprint.pformat([self._brief_sent(m) for m in self.sent], width=110, sort_dicts=False)
        raise AssertionError(
            f"{state} waiting for {n} sent message(s){label}: {len(got)} matched.\n"
            f"sent so far ({len(self.sent)}):\n{sent}\n{self._describe_calls()}"
        )

    async def wait_calls(
        self,
        method: str | None = None,
        n: int = 1,
        timeout: float = 5.0,
        match: Callable[[Call], bool] | None = None,
    ) -> list[Call]:
        """Wait until at least ``n`` calls of ``method`` (any, if None) satisfy ``match``; return them."""

        def matching() -> list[Call]:
            return [
                c
                for c in self.calls
                if (method is None or self._same_method(c.method, method)) and (match is None or match(c))
            ]

        label = f"{n} call(s) of {method or 'any method'}"
        await self.wait_for(lambda: len(matching()) >= n, timeout, what=label)
        return matching()

    def calls_to(self, method: str) -> list[Call]:
        """Every recorded call of ``method``."""
        return [c for c in self.calls if self._same_method(c.method, method)]

    # --------------------------------------------------------------- failures

    def fail_next(
        self,
        method: str,
        status: int,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        *,
        times: int = 1,
    ) -> None:
        """The next ``times`` calls of ``method`` get this error instead of being handled.

        ``body``: None → the platform's usual error envelope with a default description; a ``str`` →
        that description in the platform's error envelope; ``bytes`` → sent raw; anything else → JSON
        as-is. Failures queue up: two ``fail_next`` calls fail the next two calls.
        """
        queue = self._failures.setdefault(self._method_key(method), deque())
        for _ in range(times):
            queue.append(_Failure(status, body, dict(headers or {})))

    def _take_failure(self, method: str) -> _Failure | None:
        queue = self._failures.get(self._method_key(method))
        return queue.popleft() if queue else None

    def _failure_response(self, call: Call | None, failure: _Failure) -> web.Response:
        body = failure.body
        if body is None or isinstance(body, str):
            body = self._error_body(failure.status, body)
        return self._respond(call, failure.status, body, failure.headers)

    def _respond(
        self,
        call: Call | None,
        status: int,
        body: Any,
        headers: Mapping[str, str] | None = None,
    ) -> web.Response:
        """Answer with ``body`` (``bytes`` raw, anything else as JSON) and note the outcome on ``call``."""
        if call is not None:
            call.status = status
            call.response = None if isinstance(body, bytes) else body
            self._notify()
        if isinstance(body, bytes):
            response = web.Response(status=status, body=body)
        else:
            response = web.Response(status=status, text=json.dumps(body), content_type="application/json")
        for key, value in (headers or {}).items():
            response.headers[key] = value
        return response

    # ------------------------------------------------------- subclass hooks

    @abc.abstractmethod
    def _setup_routes(self, app: web.Application) -> None:
        """Add the platform's routes to ``app``."""

    @abc.abstractmethod
    def _error_body(self, status: int, description: str | None) -> Any:
        """The platform's error payload for ``status`` (``description`` None → a default one)."""

    async def _on_start(self) -> None:
        """Called after the server listens (start background tasks here)."""
        return None

    async def _on_stop(self) -> None:
        """Called at the start of ``stop()``, after the closing flag is set (stop background tasks)."""
        return None

    def _parked_requests(self) -> int:
        """How many requests are parked (long polls etc.); ``stop()`` waits briefly for them to answer."""
        return 0

    def _method_key(self, method: str) -> str:
        """Normalised method name used to match ``fail_next`` and ``calls_to`` (identity by default)."""
        return method

    def _same_method(self, a: str, b: str) -> bool:
        return self._method_key(a) == self._method_key(b)

    # ---------------------------------------------------------------- helpers

    def _record_call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        http_method: str = "POST",
        path: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> Call:
        call = Call(method, params, time.monotonic(), http_method, path, None, dict(headers or {}))
        self.calls.append(call)
        self._notify()
        return call

    def _record_sent(self, message: SentMessage) -> SentMessage:
        message.setdefault("time", time.monotonic())
        self.sent.append(message)
        self._notify()
        return message

    def _notify(self) -> None:
        """Wake every waiter so it re-checks its condition."""
        if self._changed is not None:
            self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_changed(self, timeout: float | None) -> None:
        """Sleep until the next ``_notify()`` (or ``timeout`` seconds; None = no limit)."""
        if self._changed is None:
            self._changed = asyncio.Event()
        event = self._changed
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass

    async def _wait(
        self,
        predicate: Callable[[], Any],
        timeout: float | None,
        *,
        poll: float | None = None,
        closing_ok: bool = False,
    ) -> Any:
        """Wait until ``predicate()`` is truthy; return its last value (falsy on timeout, or on stop
        unless ``closing_ok``)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            value = predicate()
            if value or (self._closing and not closing_ok):
                return value
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return value
            if poll is not None:
                remaining = poll if remaining is None else min(remaining, poll)
            await self._wait_changed(remaining)

    @staticmethod
    def _brief_sent(message: SentMessage) -> dict[str, Any]:
        keys = ("method", "chat_id", "message_id", "thread_id", "reply_to", "parse_mode", "text")
        brief = {k: message.get(k) for k in keys if message.get(k) is not None}
        text = brief.get("text")
        if isinstance(text, str) and len(text) > 200:
            brief["text"] = f"{text[:200]}... ({len(text)} chars)"
        return brief

    def _describe_calls(self, last: int = 15) -> str:
        failed = [c for c in self.calls if c.status is not None and not 200 <= c.status < 300]
        recent = self.calls[-last:]
        lines = [f"calls: {len(self.calls)} in total, {len(failed)} failed; last {len(recent)}:"]
        for c in recent:
            status = c.status if c.status is not None else "pending"
            detail = c.response.get("description") if isinstance(c.response, dict) else None
            lines.append(f"  {c.method} -> {status}" + (f" {detail}" if detail else ""))
        return "\n".join(lines)
