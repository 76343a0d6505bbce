"""Liveness of the Discord gateway connection, from its heartbeat ACKs.

discord.py's keep-alive handler records when the last heartbeat ACK came (read
from ``client.ws``, no per-frame hook; debug events stay off, they cost a task
per gateway frame). No ACK for ``degraded_after_missed_acks`` heartbeat
intervals -> health is "degraded"; for ``reconnect_after_missed_acks`` intervals
-> the watchdog drops the zombie connection, and discord.py resumes.
discord.py's own check only fires when *nothing* arrives (``heartbeat_timeout``),
which misses a gateway that still sends events but no ACKs.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Any

import discord
import structlog

from .._health import Health
from ._settings import DiscordSettings

__all__ = ["HeartbeatWatchdog"]

log = structlog.get_logger("hermes.discord")


def _keep_alive(client: discord.Client) -> Any:
    """discord.py's heartbeat thread of the current connection (None between connections).

    Its ``_last_ack`` (``time.perf_counter()``) is set when the connection says HELLO and at
    every HEARTBEAT_ACK; ``latency`` stays infinite until the first ACK of that connection.
    """
    ws = getattr(client, "ws", None)
    return getattr(ws, "_keep_alive", None) if ws is not None else None


class HeartbeatWatchdog:
    def __init__(self, settings: DiscordSettings, ready: asyncio.Event, health: Health) -> None:
        self._settings = settings
        self._ready = ready
        self._health = health
        #: the watchdog declared the ACKs missing; the last ACK time (perf_counter) it saw then
        self.ack_silent = False
        self._silent_mark = 0.0
        #: observability for tests and /status
        self.forced_reconnects = 0

    async def run(self, client: discord.Client) -> None:
        """Watch ``client`` until it closes."""
        s = self._settings
        forced_for: float | None = None
        while not client.is_closed():
            keep_alive = _keep_alive(client)
            interval = getattr(keep_alive, "interval", None)
            await asyncio.sleep(min(interval / 4, 1.0) if isinstance(interval, int | float) and interval > 0 else 0.5)
            keep_alive = _keep_alive(client)
            interval = getattr(keep_alive, "interval", None)
            last_ack = getattr(keep_alive, "_last_ack", None)
            latency = getattr(keep_alive, "latency", math.inf)
            if not isinstance(interval, int | float) or interval <= 0 or not isinstance(last_ack, float):
                continue  # between connections (or a discord.py without these: its own check remains)
            if self.ack_silent:
                # An ACK on this connection, newer than the silence: the gateway answers again.
                if isinstance(latency, float) and math.isfinite(latency) and last_ack > self._silent_mark:
                    self.ack_silent = False
                    log.info("discord.heartbeat_recovered")
                    if self._health.state == "degraded" and self._ready.is_set():
                        self._health.set("live", None)
            if not self._ready.is_set():
                continue
            silent = time.perf_counter() - last_ack
            if silent > interval * s.degraded_after_missed_acks and not self.ack_silent:
                self.ack_silent, self._silent_mark = True, last_ack
                reason = f"no heartbeat ACK from the Discord gateway for {silent:.1f}s"
                log.warning("discord.heartbeat_missed", silent_s=round(silent, 2), interval_s=interval)
                self._health.set("degraded", reason)
            if silent > interval * s.reconnect_after_missed_acks and forced_for != last_ack:
                forced_for = last_ack
                ws = client.ws
                if ws is not None:
                    self.forced_reconnects += 1
                    log.warning("discord.zombie_reconnect", silent_s=round(silent, 2))
                    # As discord.py's own zombie check does: close with 4000, which it resumes from.
                    with contextlib.suppress(Exception):
                        await ws.close(4000)
