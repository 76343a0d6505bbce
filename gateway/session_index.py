"""The routing index: session key -> the session a chat is talking to now.

Lives in state.db (``gateway_session_index``), so a restart, a /resume or a
/handoff is just a row. Reset policies are applied here, and an entry that
points at an ended or deleted session is healed, never followed.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from adapters.base import InboundMessage
from storage import StateStore, new_session_id
from storage import _ops as ops

from .config import SessionResetConfig


@dataclass(frozen=True)
class Binding:
    session_key: str
    session_id: str
    created: bool  # a new session was started for this message
    reset_reason: str | None = None  # "idle" / "daily" when a policy rotated it
    previous_session_id: str | None = None


def reset_reason(policy: SessionResetConfig, last_active: float, now: float) -> str | None:
    """Why a session whose last activity was ``last_active`` must rotate now, if it must."""
    if policy.mode in ("idle", "both") and now - last_active > policy.idle_minutes * 60:
        return "idle"
    if policy.mode in ("daily", "both"):
        local_now = datetime.fromtimestamp(now)
        boundary = local_now.replace(hour=policy.at_hour, minute=0, second=0, microsecond=0)
        if local_now < boundary:
            boundary -= timedelta(days=1)
        if last_active < boundary.timestamp():
            return "daily"
    return None


def _lookup(conn: sqlite3.Connection, key: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT i.session_id, i.updated_at, s.id AS live_id, s.ended_at, "
        "(SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = i.session_id) AS last_message_at "
        "FROM gateway_session_index i LEFT JOIN sessions s ON s.id = i.session_id "
        "WHERE i.session_key = ?",
        (key,),
    ).fetchone()
    return None if row is None else dict(zip(row.keys(), tuple(row), strict=True))


def _live(row: dict[str, Any] | None) -> bool:
    return row is not None and row["live_id"] is not None and row["ended_at"] is None


def _last_active(row: dict[str, Any]) -> float:
    """The later of the last message and the moment the key was (re)bound, so a
    session just resumed with /resume is not immediately idle. Derived from
    data, so an ordinary turn needs no write to keep it current."""
    return max(float(row["updated_at"]), float(row["last_message_at"] or 0.0))


def _bind(conn: sqlite3.Connection, key: str, session_id: str, msg: InboundMessage | None, now: float) -> None:
    conn.execute(
        """
        INSERT INTO gateway_session_index
            (session_key, session_id, platform, chat_id, chat_type, thread_id, user_id, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(session_key) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at
        """,
        (
            key,
            session_id,
            msg.platform if msg else key.split(":")[2] if key.count(":") >= 2 else "unknown",
            msg.chat_id if msg else None,
            str(msg.chat_type) if msg else None,
            msg.thread_id if msg else None,
            msg.user_id if msg else None,
            now,
            now,
        ),
    )


class SessionIndex:
    def __init__(self, store: StateStore, policy: SessionResetConfig) -> None:
        self._store = store
        self._policy = policy

    async def current(self, key: str) -> str | None:
        """The live session bound to a key, without creating one."""
        row = await self._store.read(lambda c: _lookup(c, key))
        if row is None or row["live_id"] is None or row["ended_at"] is not None:
            return None
        return str(row["session_id"])

    async def due_reset(self, key: str) -> str | None:
        """The bound session if the reset policy is about to rotate it (so the
        agent can get one turn to save memories first)."""
        if self._policy.mode == "none":
            return None
        row = await self._store.read(lambda c: _lookup(c, key))
        if row is None or not _live(row):
            return None
        if reset_reason(self._policy, _last_active(row), time.time()) is None:
            return None
        return str(row["session_id"])

    async def resolve(self, key: str, msg: InboundMessage, *, model: str | None = None) -> Binding:
        """The session for this message: the bound one, or a new one when there is
        none, it ended or vanished, or the reset policy says its time is up."""
        now = time.time()
        # The common case, a live session with no reset due, is a read.
        current = await self._store.read(lambda c: _lookup(c, key))
        if current is not None and _live(current) and reset_reason(self._policy, _last_active(current), now) is None:
            return Binding(key, str(current["session_id"]), created=False)

        def op(conn: sqlite3.Connection) -> Binding:
            row = _lookup(conn, key)  # again, under the write lock
            previous: str | None = None
            reason: str | None = None
            if row is not None and _live(row):
                reason = reset_reason(self._policy, _last_active(row), now)
                if reason is None:
                    return Binding(key, str(row["session_id"]), created=False)
                previous = str(row["session_id"])
                ops.end_session(conn, previous, f"session_reset:{reason}", at=now)
            elif row is not None:
                previous = str(row["session_id"])  # stale: ended or deleted elsewhere
            session_id = new_session_id("gateway")
            ops.create_session(conn, session_id, msg.platform, model=model, user_id=msg.user_id, started_at=now)
            _bind(conn, key, session_id, msg, now)
            return Binding(key, session_id, created=True, reset_reason=reason, previous_session_id=previous)

        return await self._store.write(op)

    async def rebind(self, key: str, session_id: str, msg: InboundMessage | None = None) -> None:
        """Point a key at an existing session (used by /resume and /handoff)."""
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            ops.reopen_session(conn, session_id)
            _bind(conn, key, session_id, msg, now)

        await self._store.write(op)

    async def start_new(self, key: str, msg: InboundMessage, end_reason: str, *,
                        model: str | None = None) -> Binding:
        """End the current session (if any) and bind a fresh one (/new, /reset)."""
        now = time.time()

        def op(conn: sqlite3.Connection) -> Binding:
            row = _lookup(conn, key)
            previous = None
            if row is not None and row["live_id"] is not None:
                previous = str(row["session_id"])
                if row["ended_at"] is None:
                    ops.end_session(conn, previous, end_reason, at=now)
            session_id = new_session_id("gateway")
            ops.create_session(conn, session_id, msg.platform, model=model, user_id=msg.user_id, started_at=now)
            _bind(conn, key, session_id, msg, now)
            return Binding(key, session_id, created=True, previous_session_id=previous)

        return await self._store.write(op)
