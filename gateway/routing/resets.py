"""Automatic resets, decided when they fall due, and the agent's turn before each one.

The reference gives the agent one turn to save memories and skills before a
session is auto-reset. That turn is a model call of its own (several, with
tools), so it never runs on the path of the user's next message: the sweeper
ends a session as soon as its policy says so and starts the flush in the
background; a message that finds its session due before the sweeper came by
rotates it itself and starts the flush the same way.

A flush still running when the chat's next message comes does not hold that
message up: the message goes to the fresh session at once. What the flush
saves reaches the prompt of the session after it (memory is a frozen snapshot
per session, as for any memory written mid-session).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from core import BackgroundTasks
from gateway.routing.services import Services

log = structlog.get_logger("hermes.router")

#: the agent's turn on a session that an automatic reset ends (memories and skills)
MemoryFlush = Callable[[Services, str], Awaitable[None]]

class Resets:
    def __init__(self, services: Services, flush: MemoryFlush | None) -> None:
        self._services = services
        self._flush = flush
        self._tasks = BackgroundTasks()
        self._running: set[str] = set()

    def flush_in_background(self, session_id: str) -> None:
        """Give the agent its turn on ``session_id`` without anyone waiting for it.

        Whoever ended the session calls this (the sweep, or the message that
        rotated it), and only one of them can have ended it; a flush already
        running for the session is not started twice.
        """
        if self._flush is None or session_id in self._running:
            return
        self._running.add(session_id)
        self._tasks.spawn(self._run(self._flush, session_id), name=f"reset-flush:{session_id}")

    async def _run(self, flush: MemoryFlush, session_id: str) -> None:
        log.info("router.reset_flush_started", session_id=session_id)
        try:
            await flush(self._services, session_id)
        finally:
            self._running.discard(session_id)

    async def sweep(self) -> int:
        """End every session whose reset is due now and flush each; how many were ended.

        A chat with a turn running or waiting is left to that turn: its message
        rotates the session under the lane's order, so no answer lands in a
        session the sweep ended a moment before.
        """
        services = self._services
        ended = 0
        for key, session_id in await services.index.due_resets():
            if services.lanes.busy(key):
                continue
            reason = await services.index.end_if_due(key, session_id)
            if reason is None:
                continue
            ended += 1
            log.info("router.session_reset", session_key=key, session_id=session_id, reason=reason)
            self.flush_in_background(session_id)
        return ended

    async def join(self) -> None:
        """Wait for the flushes running now (tests)."""
        await self._tasks.join()

    async def aclose(self, grace: float = 5.0) -> None:
        """Refuse new flushes, give running ones ``grace`` seconds, cancel the rest."""
        await self._tasks.aclose(grace)
