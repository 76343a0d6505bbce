"""Inbound dedupe: a platform message seen before never produces a second turn.

Persisted in state.db so it survives restarts; rows older than the retention
window are swept (platforms redeliver within hours, not weeks).
"""

from __future__ import annotations

import sqlite3
import time

from storage import StateStore


class Dedupe:
    def __init__(self, store: StateStore, retention_hours: float) -> None:
        self._store = store
        self._retention = retention_hours * 3600.0

    async def first_sighting(self, platform: str, delivery_key: str) -> bool:
        """Record the message; True only the first time it is seen."""
        now = time.time()

        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "INSERT OR IGNORE INTO gateway_inbound_seen (platform, delivery_key, seen_at) VALUES (?, ?, ?)",
                (platform, delivery_key, now),
            )
            return cur.rowcount == 1

        return await self._store.write(op)

    async def forget(self, platform: str, delivery_key: str) -> None:
        """Release a message that was accepted but never processed, so a redelivery counts."""
        await self._store.write(
            lambda c: c.execute(
                "DELETE FROM gateway_inbound_seen WHERE platform = ? AND delivery_key = ?", (platform, delivery_key)
            )
        )

    async def sweep(self) -> int:
        cutoff = time.time() - self._retention
        return await self._store.write(
            lambda c: c.execute("DELETE FROM gateway_inbound_seen WHERE seen_at < ?", (cutoff,)).rowcount
        )
