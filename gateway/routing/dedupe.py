"""Inbound dedupe: a platform message seen before never produces a second turn.

A message is *claimed* at intake: refused if its delivery key is in flight in
this process or recorded in state.db. A message that becomes a turn is
recorded in the same transaction that stores its question, so

* the turn's intake costs a read, not a commit of its own;
* "seen" and "stored" can never disagree: a message redelivered after a crash
  that cut it off before its question was stored (waiting in its lane, say)
  is taken again instead of being lost as a duplicate.

Anything else that answers a message (a command, a notice) records it at once.
Rows older than the retention window are swept (platforms redeliver within
hours, not weeks).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from storage import StateStore, inbound


class Dedupe:
    def __init__(self, store: StateStore, retention_hours: float) -> None:
        self._store = store
        self._retention = retention_hours * 3600.0
        #: claimed here and not yet recorded or released: a concurrent copy is a duplicate
        self._in_flight: set[tuple[str, str]] = set()

    async def claim(self, platform: str, delivery_key: str) -> bool:
        """True only the first time this message is seen; the caller then records or releases it."""
        item = (platform, delivery_key)
        if item in self._in_flight:
            return False
        self._in_flight.add(item)  # before the read: a copy arriving meanwhile is refused
        try:
            seen = await self._store.read(lambda c: inbound.seen(c, platform, delivery_key))
        except BaseException:
            self._in_flight.discard(item)
            raise
        if seen:
            self._in_flight.discard(item)
            return False
        return True

    def record_op(self, platform: str, delivery_key: str) -> Callable[[sqlite3.Connection], None]:
        """Record a claimed message inside another write's transaction (its question's)."""
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            inbound.record(conn, platform, delivery_key, now=now)

        return op

    async def record(self, platform: str, delivery_key: str) -> None:
        """Record a claimed message now (it was answered without a turn), then release it."""
        try:
            await self._store.write(self.record_op(platform, delivery_key))
        finally:
            self.release(platform, delivery_key)

    def release(self, platform: str, delivery_key: str) -> None:
        """The claim ends: recorded with its question, or never processed (a redelivery counts)."""
        self._in_flight.discard((platform, delivery_key))

    async def sweep(self) -> int:
        cutoff = time.time() - self._retention
        return await self._store.write(lambda c: inbound.sweep(c, seen_before=cutoff))
