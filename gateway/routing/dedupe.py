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

For a message whose sender waits for its answer (an HTTP request), the record
also keeps where its question was stored and, in the answer's transaction,
the answer: a retry of it is answered from there (``get``), after a crash too.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable

from storage import SeenMessage, Store, inbound, userdata


class Dedupe:
    def __init__(self, store: Store, retention_hours: float) -> None:
        self._store = store
        self._retention = retention_hours * 3600.0
        #: claimed here and not yet recorded or released: a concurrent copy is a duplicate;
        #: each event is set when its claim ends
        self._in_flight: dict[tuple[str, str], asyncio.Event] = {}

    async def claim(self, platform: str, delivery_key: str) -> bool:
        """True only the first time this message is seen; the caller then records or releases it."""
        item = (platform, delivery_key)
        if not self.hold(platform, delivery_key):
            return False
        try:  # held before the read: a copy arriving meanwhile is refused
            seen = await self._store.read(lambda c: inbound.seen(c, platform, delivery_key))
        except BaseException:
            self.release(*item)
            raise
        if seen:
            self.release(*item)
            return False
        return True

    def hold(self, platform: str, delivery_key: str) -> bool:
        """Claim a message without looking at state.db (a retry about to resume its turn);
        False while another claim on it runs here."""
        item = (platform, delivery_key)
        if item in self._in_flight:
            return False
        self._in_flight[item] = asyncio.Event()
        return True

    def in_flight(self, platform: str, delivery_key: str) -> bool:
        return (platform, delivery_key) in self._in_flight

    async def settled(self, platform: str, delivery_key: str) -> None:
        """Return once no claim on this message runs here (its turn ended)."""
        event = self._in_flight.get((platform, delivery_key))
        if event is not None:
            await event.wait()

    def record_op(self, platform: str, delivery_key: str, *,
                  user_id: str | None = None) -> Callable[[sqlite3.Connection], None]:
        """Record a claimed message inside another write's transaction."""
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            inbound.record(conn, platform, delivery_key, now=now, user_id=user_id)

        return op

    def question_op(self, platform: str, delivery_key: str | None, *,
                    user_id: str | None = None) -> Callable[[sqlite3.Connection, str], None]:
        """Record a claimed message in the transaction that stores it as a user message of a
        session (the second argument), remembering that message as its question; and its sender
        (``storage.userdata``: whose message it is, for an export or a forget). Without a
        delivery key (a request that cannot come twice) only its sender is recorded."""
        now = time.time()

        def op(conn: sqlite3.Connection, session_id: str) -> None:
            userdata.record_sender(conn, session_id, platform, user_id)
            if delivery_key is not None:
                inbound.record(conn, platform, delivery_key, now=now, session_id=session_id, user_id=user_id)

        return op

    @staticmethod
    def answer_op(platform: str, delivery_key: str, answer: str) -> Callable[[sqlite3.Connection], None]:
        """Keep the final word on a recorded message, for its retries (inside the answer's transaction)."""
        return lambda conn: inbound.record_answer(conn, platform, delivery_key, answer)

    async def record_answer(self, platform: str, delivery_key: str, answer: str) -> None:
        await self._store.write(self.answer_op(platform, delivery_key, answer))

    async def get(self, platform: str, delivery_key: str) -> SeenMessage | None:
        """What is recorded of a message seen before, or None."""
        return await self._store.read(lambda c: inbound.get(c, platform, delivery_key))

    async def question_open(self, seen: SeenMessage) -> bool:
        """Whether ``seen``'s question is still its session's latest user message (a turn may answer it)."""
        session_id, question_id = seen.session_id, seen.question_id
        if session_id is None or question_id is None:
            return False
        return await self._store.read(lambda c: inbound.question_open(c, session_id, question_id))

    async def record(self, platform: str, delivery_key: str, *, user_id: str | None = None) -> None:
        """Record a claimed message now (it was answered without a turn), then release it."""
        try:
            await self._store.write(self.record_op(platform, delivery_key, user_id=user_id))
        finally:
            self.release(platform, delivery_key)

    def release(self, platform: str, delivery_key: str) -> None:
        """The claim ends: recorded with its question, or never processed (a redelivery counts)."""
        event = self._in_flight.pop((platform, delivery_key), None)
        if event is not None:
            event.set()

    async def sweep(self) -> int:
        cutoff = time.time() - self._retention
        return await self._store.write(lambda c: inbound.sweep(c, seen_before=cutoff))
