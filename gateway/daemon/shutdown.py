"""Disconnecting every adapter at shutdown, together and within one bound.

systemd (``TimeoutStopSec``) and Docker (``--stop-timeout``) kill the process
when a stop takes too long, and what comes after the adapters (draining the
writer, the TRUNCATE checkpoint) is what must not be cut. One slow platform
(Telegram's disconnect alone can wait on several HTTP calls) must therefore
not add its wait to the others', nor hold the rest of the shutdown hostage:
all adapters disconnect concurrently and whatever has not finished when
``gateway.disconnect_timeout`` runs out is cancelled and named in the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import structlog

from adapters.base import Adapter

__all__ = ["disconnect_all"]

log = structlog.get_logger("hermes.shutdown")

#: how long cancelled disconnects get to unwind before the shutdown moves on without them
_CANCEL_GRACE = 1.0


async def disconnect_all(adapters: Mapping[str, Adapter], bound: float) -> list[str]:
    """Disconnect all adapters concurrently; return the names of those cut off by ``bound``."""
    tasks = {
        asyncio.create_task(adapter.disconnect(), name=f"disconnect:{name}"): name
        for name, adapter in adapters.items()
    }
    if not tasks:
        return []
    done, pending = await asyncio.wait(tasks, timeout=bound)
    for task in done:
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("adapter.disconnect_failed", adapter=tasks[task], error=f"{type(exc).__name__}: {exc}")
    cut = sorted(tasks[t] for t in pending)
    if cut:
        log.warning("gateway.disconnect_cut", adapters=cut, bound_seconds=bound)
        for task in pending:
            task.cancel()
        # A disconnect that swallows its cancellation must not stall the stop either.
        await asyncio.wait(pending, timeout=_CANCEL_GRACE)
    return cut
