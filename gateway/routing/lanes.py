"""Per-session lanes: one turn at a time per key, many keys at once.

Each key has a FIFO of jobs and at most one worker; a global semaphore bounds
how many turns run concurrently across keys. Nothing queued is dropped or
overwritten. The running job of a key can be cancelled (/stop) without
touching what waits behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from adapters.base import InboundMessage
from gateway.errors import LaneFullError, LanesClosedError

log = structlog.get_logger("hermes.lanes")

Job = Callable[[], Coroutine[Any, Any, None]]


class LaneGate(Protocol):
    """Several nodes (PostgreSQL): a key's jobs run here only while this node serves the key."""

    async def enter(self, key: str) -> None:
        """Return once this node may run the key's next job (it holds the key's lane)."""

    def idle(self, key: str) -> None:
        """The key's lane ran dry here: it may be let go."""

    def holder(self, key: str) -> tuple[str, int] | None:
        """This node's id and its token for the key's lane, while it holds it (a parked message is
        kept under them); None otherwise."""

    def fence(self, key: str) -> Callable[[Any], bool] | None:
        """A check, for the transaction that stores a turn's answer, that this node still holds
        the key's lane under the token it ran the turn with."""

    async def handed_off(self, msg: InboundMessage, key: str) -> bool:
        """True when another live node serves ``key`` and ``msg`` was written to its inbox (the
        router is done with it); False: run it here."""


@dataclass
class _Queued:
    job: Job
    on_drop: Callable[[], Awaitable[None]] | None = None
    label: str = ""  # what /queue shows for it


@dataclass
class _Lane:
    queue: deque[_Queued] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None
    current: asyncio.Task[None] | None = None
    acked_burst: bool = False  # one "queued" notice per burst of messages


class Lanes:
    def __init__(self, max_concurrent: int, max_queued_per_key: int) -> None:
        self._sem = asyncio.Semaphore(max_concurrent)
        self._max_queued = max_queued_per_key
        self._lanes: dict[str, _Lane] = {}
        self._closed = False
        #: None on one node (SQLite); the daemon sets it on a cluster
        self.gate: LaneGate | None = None

    # ---------------------------------------------------------------- queries

    def busy(self, key: str) -> bool:
        lane = self._lanes.get(key)
        return lane is not None and (lane.current is not None or bool(lane.queue))

    def waiting(self, key: str) -> int:
        lane = self._lanes.get(key)
        return len(lane.queue) if lane else 0

    def is_running(self, key: str) -> bool:
        lane = self._lanes.get(key)
        return lane is not None and lane.current is not None

    def queued_labels(self, key: str) -> list[str]:
        """What waits in this key's lane, oldest first (read-only, for /queue)."""
        lane = self._lanes.get(key)
        return [item.label for item in lane.queue] if lane else []

    async def wait_idle(self, key: str) -> None:
        """Return once nothing runs or waits for ``key`` (its worker ran the lane dry)."""
        while (lane := self._lanes.get(key)) is not None and lane.worker is not None:
            await asyncio.wait({lane.worker})

    @property
    def total_waiting(self) -> int:
        return sum(len(lane.queue) for lane in self._lanes.values())

    @property
    def running(self) -> int:
        return sum(1 for lane in self._lanes.values() if lane.current is not None)

    # ---------------------------------------------------------------- intake

    def submit(self, key: str, job: Job, *, on_drop: Callable[[], Awaitable[None]] | None = None,
               label: str = "") -> tuple[int, bool]:
        """Queue a job. Returns (jobs ahead of it, whether to acknowledge the wait).

        The acknowledgement flag is true once per burst: for the first message
        that has to wait behind a running turn.
        """
        if self._closed:
            raise LanesClosedError("the gateway is shutting down")
        lane = self._lanes.setdefault(key, _Lane())
        if len(lane.queue) >= self._max_queued:
            raise LaneFullError(f"{len(lane.queue)} messages already wait in this conversation")
        ahead = len(lane.queue) + (1 if lane.current is not None else 0)
        lane.queue.append(_Queued(job, on_drop, label))
        ack = ahead > 0 and not lane.acked_burst
        if ack:
            lane.acked_burst = True
        if lane.worker is None:
            lane.worker = asyncio.create_task(self._work(key, lane), name=f"lane:{key}")
        return ahead, ack

    async def _work(self, key: str, lane: _Lane) -> None:
        try:
            while lane.queue:
                if self.gate is not None:
                    await self.gate.enter(key)  # the job stays queued (visible, dropped by drain) until then
                # Take a global slot first: until then the job stays visible in
                # the queue (counted as waiting, dropped cleanly by drain).
                async with self._sem:
                    if not lane.queue:
                        break
                    item = lane.queue.popleft()
                    lane.current = asyncio.create_task(item.job(), name=f"turn:{key}")
                    try:
                        await asyncio.shield(lane.current)
                    except asyncio.CancelledError:
                        if lane.current.cancelled() and not self._worker_cancelled():
                            log.info("lanes.turn_cancelled", session_key=key)
                        else:
                            raise
                    except Exception:
                        log.exception("lanes.turn_crashed", session_key=key)
                    finally:
                        lane.current = None
        finally:
            lane.worker = None
            if not lane.queue and self._lanes.get(key) is lane:
                del self._lanes[key]
                if self.gate is not None:
                    self.gate.idle(key)

    @staticmethod
    def _worker_cancelled() -> bool:
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0

    async def cancel_running(self, key: str) -> bool:
        """Cancel the turn running for ``key`` (what waits behind it stays)."""
        lane = self._lanes.get(key)
        if lane is None or lane.current is None or lane.current.done():
            return False
        current = lane.current
        current.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await current
        return True

    # -------------------------------------------------------------- shutdown

    async def drain(self, grace: float) -> int:
        """Stop intake; let running and queued turns finish within ``grace`` seconds.

        Whatever is still queued at the deadline is dropped through its
        ``on_drop`` hook (so the platform can redeliver it); running turns are
        cancelled. Returns how many jobs were cut off. Later submits raise
        ``LanesClosedError``.
        """
        self._closed = True
        workers = [lane.worker for lane in self._lanes.values() if lane.worker is not None]
        if workers:
            await asyncio.wait(workers, timeout=grace)
        cut = 0
        for lane in list(self._lanes.values()):
            while lane.queue:
                item = lane.queue.popleft()
                cut += 1
                if item.on_drop is not None:
                    with contextlib.suppress(Exception):
                        await item.on_drop()
            if lane.current is not None and not lane.current.done():
                lane.current.cancel()
                cut += 1
        remaining = [lane.worker for lane in self._lanes.values() if lane.worker is not None]
        for worker in remaining:
            worker.cancel()
        if remaining:
            await asyncio.wait(remaining, timeout=5)
        return cut
