"""Socket Mode: the websocket events come in on, and its liveness.

The SDK's own reconnect is off; one watchdog owns reconnection. The SDK pings
every ``ping_interval`` (aiohttp's heartbeat closes a socket whose pong does not
come); the watchdog sees a closed or silent socket, reports health "degraded"
and reconnects once, under the SDK's connect lock (the old socket is closed and
its receiver cancelled first, so there are never two live handlers). An
envelope Bolt cannot take is acknowledged and dropped, or Slack would redeliver
it for hours.

An ``events_api`` envelope with an event goes to ``events`` (not Bolt, which would ack it first
and drop its ``retry_attempt``) and is acked once the router has taken it; deferred (storage
away) or still with the router after ``ACK_WAIT``, it is not acked, and Slack redelivers it in a
new envelope (same ``event_id``, ``retry_attempt`` > 0) that joins or redispatches it. Slash
commands and interactive envelopes are acked at once: Slack does not redeliver them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import run_async_bolt_app, send_async_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.response import BoltResponse
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from .._health import Health
from ..base import AdapterError
from ..settings import reveal
from ._inbound import command_well_formed, well_formed
from ._settings import SlackSettings

__all__ = ["SocketMode"]

log = structlog.get_logger("hermes.slack")

STOP_WAIT = 5.0
#: Reconnect attempts in a row that may fail before the connection is given up (the runner restarts it).
RECONNECT_FAILURES = 3


class _SocketHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler, with envelopes Bolt cannot take acknowledged and dropped, and
    ``interactive`` ones (button presses) acknowledged, then given to ``interactive``."""

    interactive: Callable[[Any], None] = staticmethod(lambda payload: None)
    events: Callable[[Any, object], Awaitable[bool]] | None = None

    async def handle(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        if req.type == "interactive":
            # Acknowledged before anything else: Slack shows the user an error after 3 s without it.
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            self.interactive(req.payload)
            return
        if (req.type == "events_api" and self.events is not None and well_formed(req.payload)
                and req.payload.get("type") == "event_callback"):
            if await self.events(req.payload, req.retry_attempt or 0):
                await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return  # not acked: Slack redelivers it
        start = time.time()
        response: BoltResponse | None = None
        if (req.type == "events_api" and well_formed(req.payload)) or (
            req.type == "slash_commands" and command_well_formed(req.payload)
        ):
            try:
                response = await run_async_bolt_app(self.app, req)
            except Exception as exc:
                log.warning("slack.event_malformed", envelope_type=req.type, error=type(exc).__name__)
        if response is None or response.status != 200:
            # Retrying cannot make Bolt take it: acknowledge, or Slack redelivers it for hours.
            log.warning("slack.event_dropped", envelope_type=req.type,
                        status=None if response is None else response.status)
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        await send_async_response(client, req, response, start)


async def _socket_alive(sm: Any) -> bool:
    session = sm.current_session
    if session is None or session.closed:
        return False
    return not await sm.is_ping_pong_failing()


class SocketMode:
    def __init__(self, settings: SlackSettings, ready: asyncio.Event, stopping: asyncio.Event, health: Health,
                 interactive: Callable[[Any], None], events: Callable[[Any, object], Awaitable[bool]]) -> None:
        """``interactive(payload)``: an ``interactive`` envelope's payload, acknowledged already;
        ``events(payload, retry_attempt)``: an event, and whether its envelope may be acked."""
        self._settings = settings
        self._interactive = interactive
        self._events = events
        self._ready = ready
        self._stopping = stopping
        self._health = health
        self._handler: AsyncSocketModeHandler | None = None
        #: reconnects made by the watchdog (observability for tests and /status)
        self.reconnects = 0

    async def serve(self, app: AsyncApp, url: str, bot_user: str) -> None:
        """Connect to ``url`` and keep the socket alive until the adapter stops."""
        s = self._settings
        handler = _SocketHandler(
            app, app_token=reveal(s.app_token), logger=logging.getLogger("hermes.slack.socket"), ping_interval=s.ping_interval
        )
        handler.interactive = self._interactive
        handler.events = self._events
        sm = handler.client
        # One owner of reconnection (the watchdog below); the SDK's own would race it.
        sm.default_auto_reconnect_enabled = False
        sm.auto_reconnect_enabled = False
        sm.wss_uri = url  # the SDK connects here instead of asking apps.connections.open again
        self._handler = handler
        connect_bound = max(10.0, 3 * s.ping_interval)
        try:
            await asyncio.wait_for(handler.connect_async(), connect_bound)  # type: ignore[no-untyped-call]
        except TimeoutError:
            raise AdapterError(f"Slack Socket Mode did not connect within {connect_bound:g}s") from None
        self._ready.set()
        self._health.set("live")
        log.info("slack.socket_connected", bot_user=bot_user)
        interval = s.watchdog_interval or s.ping_interval / 2
        failures = 0
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), interval)
            if self._stopping.is_set() or await _socket_alive(sm):
                continue
            self._health.set("degraded", "the Socket Mode connection went silent or closed; reconnecting")
            self.reconnects += 1
            log.warning("slack.socket_reconnecting", reconnects=self.reconnects)
            try:
                await asyncio.wait_for(sm.connect_to_new_endpoint(), connect_bound)
            except Exception as exc:
                failures += 1
                log.warning("slack.socket_reconnect_failed", error=type(exc).__name__, failures=failures)
                if failures >= RECONNECT_FAILURES:
                    raise AdapterError(f"Slack Socket Mode reconnect failed {failures} times") from None
                continue
            # The new socket's first pong has not come yet: do not count the old silence against it.
            sm.last_ping_pong_time = time.time()
            if await _socket_alive(sm):
                failures = 0
                self._health.set("live")
                log.info("slack.socket_reconnected", reconnects=self.reconnects)

    async def close(self) -> None:
        handler, self._handler = self._handler, None
        if handler is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(handler.close_async(), STOP_WAIT)  # type: ignore[no-untyped-call]
