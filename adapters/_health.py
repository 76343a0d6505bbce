"""An adapter's own account of its liveness, which /readyz shows beside the supervisor's state.

One object per adapter, shared by the parts that notice a change (the connection,
a watchdog): "starting", "live", "degraded" or "failed", with why when not live.
"""

from __future__ import annotations

import time
from collections import deque

import structlog

__all__ = ["Health"]


class Health:
    def __init__(self, platform: str, reason: str | None = None, *, history: int = 0) -> None:
        """``history``: how many of the last changes to keep in ``history`` (oldest first)."""
        self.state = "starting"
        self.reason = reason
        #: (time, state, reason) of the last changes
        self.history: deque[tuple[float, str, str | None]] = deque(maxlen=history)
        self._log = structlog.get_logger(f"hermes.{platform}")
        self._event = f"{platform}.health"

    def set(self, state: str, reason: str | None = None) -> None:
        """Record a change (logged once; setting the same state and reason again is no change)."""
        if (state, reason) != (self.state, self.reason):
            self.state, self.reason = state, reason
            self.history.append((time.time(), state, reason))
            self._log.info(self._event, health=state, reason=reason)
