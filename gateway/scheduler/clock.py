"""Time as the scheduler sees it: the wall clock, or a fake one a test moves by hand."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol

__all__ = ["MAX_SLEEP", "Clock", "FakeClock", "SystemClock"]

#: the longest the real clock sleeps before it looks at the wall clock again: asyncio sleeps
#: on the monotonic clock, so a wall-clock jump (a suspended laptop, a corrected clock) is
#: noticed within this (one look at the heap's top: no polling of the jobs)
MAX_SLEEP = 300.0


class Clock(Protocol):
    def now(self) -> float:
        """Unix time."""

    async def sleep_until(self, when: float, wake: asyncio.Event) -> None:
        """Return at ``when``, when ``wake`` is set, or earlier; the caller looks at the time again."""


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep_until(self, when: float, wake: asyncio.Event) -> None:
        delay = min(max(0.0, when - time.time()), MAX_SLEEP)
        # Not asyncio.wait_for: on Python 3.11 it swallows a cancel that arrives as ``wake`` is set
        # (a job changed just as the daemon stops), and the scheduler's stop then waits forever.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await wake.wait()


class FakeClock:
    """A clock that moves only when a test says so (``advance``/``set``); no real waiting."""

    def __init__(self, start: float) -> None:
        self._now = start
        self._moved = asyncio.Event()
        #: how many sleeps have begun (a test waits for the scheduler to be idle again)
        self.sleeps = 0

    def now(self) -> float:
        return self._now

    def set(self, when: float) -> None:
        """Jump to ``when`` (backwards too: a clock set back)."""
        self._now = when
        self._moved.set()

    def advance(self, seconds: float) -> None:
        self.set(self._now + seconds)

    async def sleep_until(self, when: float, wake: asyncio.Event) -> None:
        self.sleeps += 1
        self._moved.clear()
        if self._now >= when or wake.is_set():
            await asyncio.sleep(0)
            return
        moved = asyncio.ensure_future(self._moved.wait())
        woken = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait({moved, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            moved.cancel()
            woken.cancel()
