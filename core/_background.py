"""Background work of the agent (reviews, titles) that must never delay a reply.

Tasks are held here so they are not garbage-collected mid-flight, and so the
daemon can wait for (or cancel) them before it closes state.db.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

from storage.errors import GatewayError

from ._budget import outside_budget

log = structlog.get_logger("hermes.agent")


class BackgroundTasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[None] | None:
        if self._closed:
            coro.close()
            return None
        # Spawned by a turn, but not part of it: the turn's time budget does not carry over.
        task = asyncio.create_task(self._guard(coro, name), name=name, context=outside_budget())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @staticmethod
    async def _guard(coro: Coroutine[Any, Any, Any], name: str) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except GatewayError as exc:  # a model or storage error we already describe well
            log.warning("agent.background_failed", task=name, error_type=type(exc).__name__, error=str(exc))
        except Exception:
            # Background work is best effort: the user already has their answer.
            log.exception("agent.background_failed", task=name)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def join(self, grace: float | None = None) -> None:
        """Wait for what is running now (tests, shutdown)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)

    async def aclose(self, grace: float = 5.0) -> None:
        """Refuse new work, give running work ``grace`` seconds, cancel the rest."""
        self._closed = True
        await self.join(grace)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
