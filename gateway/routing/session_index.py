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

import structlog

from adapters.base import InboundMessage
from gateway.config import SessionResetConfig
from storage import IndexEntry, Store, bindings, new_session_id, ops
from storage.errors import InvalidTitleError, TitleConflictError

log = structlog.get_logger("hermes.session_index")


@dataclass(frozen=True)
class Binding:
    session_key: str
    session_id: str
    created: bool  # a new session was started for this message
    reset_reason: str | None = None  # "idle" / "daily" when a policy rotated it
    previous_session_id: str | None = None
    #: a title queued with /title that could not be applied; the user is told with the reply
    title_note: str | None = None


@dataclass(frozen=True)
class PriorBinding:
    """What a key pointed at before a /handoff rebound it, so a failure can put it back."""

    session_id: str | None
    updated_at: float | None
    remembered: bool  # the key was already in the session's binding history


#: a title queued for a session that never started is forgotten after this long (a
#: terminal's chat ends with its connection; a chat may simply never write again)
PENDING_TITLE_TTL = 7 * 86400.0


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


def _live(row: IndexEntry | None) -> bool:
    return row is not None and row.session_exists and row.ended_at is None


def _last_active(row: IndexEntry) -> float:
    """The later of the last message and the moment the key was (re)bound, so a
    session just resumed with /resume is not immediately idle. Derived from
    data, so an ordinary turn needs no write to keep it current."""
    return max(row.updated_at, row.last_message_at or 0.0)


def _bind(conn: sqlite3.Connection, key: str, session_id: str, msg: InboundMessage | None, now: float) -> None:
    bindings.bind(
        conn, key, session_id,
        platform=_platform_of(key, msg),
        chat_id=msg.chat_id if msg else None,
        chat_type=str(msg.chat_type) if msg else None,
        thread_id=msg.thread_id if msg else None,
        user_id=msg.user_id if msg else None,
        now=now,
    )


def _platform_of(key: str, msg: InboundMessage | None) -> str:
    if msg is not None:
        return msg.platform
    return key.split(":")[2] if key.count(":") >= 2 else "unknown"


def rebind_in_transaction(conn: sqlite3.Connection, key: str, session_id: str) -> None:
    """Point ``key`` at ``session_id`` inside the caller's write transaction.

    The agent's compression runs it in the same transaction as the split, so
    the chat can never be left on the session that split ended.
    """
    _bind(conn, key, session_id, None, time.time())


def _apply_pending_title(conn: sqlite3.Connection, key: str, session_id: str, now: float) -> str | None:
    """A title set with /title before the session existed is applied as it is created.
    Returns what to tell the user when it could not be (they were told it was saved)."""
    title = bindings.pending_title(conn, key, queued_since=now - PENDING_TITLE_TTL)
    bindings.forget_pending_title(conn, key)
    if title is None:
        return None
    try:
        ops.set_session_title(conn, session_id, title)
    except TitleConflictError as exc:
        # Queued titles reserve nothing: another session took it first. The session
        # starts untitled rather than not at all, and the user hears why.
        _log_dropped(session_id, key, exc)
        return (f'The title "{exc.title}" you set with /title is now used by another session, so this one is '
                f'untitled. Name it with /title, for example /title {exc.suggestion}')
    except InvalidTitleError as exc:
        _log_dropped(session_id, key, exc)
        return f"The title you set with /title could not be applied ({exc}). Name this session with /title."
    return None


def _log_dropped(session_id: str, key: str, exc: Exception) -> None:
    # The error's text quotes the title, which is user content: only at debug level.
    log.warning("session_index.pending_title_dropped", session_id=session_id, session_key=key,
                error_type=type(exc).__name__)
    log.debug("session_index.pending_title_dropped_detail", session_id=session_id, error=str(exc))


def _new_id(msg: InboundMessage) -> str:
    # Terminal sessions carry the reference's 6-hex ids; every platform else 8.
    return new_session_id("terminal" if msg.platform == "cli" else "gateway")


class SessionIndex:
    def __init__(self, store: Store, policy: SessionResetConfig) -> None:
        self._store = store
        self._policy = policy

    async def current(self, key: str) -> str | None:
        """The live session bound to a key, without creating one."""
        row = await self._store.read(lambda c: bindings.lookup(c, key))
        if row is None or not row.session_exists or row.ended_at is not None:
            return None
        return row.session_id

    async def due_reset(self, key: str) -> str | None:
        """The bound session if the reset policy is about to rotate it (so the
        agent can get one turn to save memories first)."""
        if self._policy.mode == "none":
            return None
        row = await self._store.read(lambda c: bindings.lookup(c, key))
        if row is None or not _live(row):
            return None
        if reset_reason(self._policy, _last_active(row), time.time()) is None:
            return None
        return row.session_id

    async def due_resets(self) -> list[tuple[str, str]]:
        """Every (key, session) the reset policy would rotate now."""
        if self._policy.mode == "none":
            return []
        now = time.time()
        rows = await self._store.read(bindings.live_entries)
        return [(key, row.session_id) for key, row in rows
                if reset_reason(self._policy, _last_active(row), now) is not None]

    async def end_if_due(self, key: str, session_id: str) -> str | None:
        """End the key's session when the reset policy says its time is up, decided when
        it becomes due (the sweeper) instead of on the chat's next message. The key
        keeps pointing at it; that message heals the entry to a fresh session. Returns
        the reason, or None when nothing changed (the key moved on, or a message came)."""

        def op(conn: sqlite3.Connection) -> str | None:
            now = time.time()
            row = bindings.lookup(conn, key)  # again, under the write lock
            if row is None or row.session_id != session_id or not _live(row):
                return None
            reason = reset_reason(self._policy, _last_active(row), now)
            if reason is not None:
                ops.end_session(conn, session_id, f"session_reset:{reason}", at=now)
            return reason

        return await self._store.write(op)

    async def resolve(self, key: str, msg: InboundMessage, *, model: str | None = None) -> Binding:
        """The session for this message: the bound one, or a new one when there is
        none, it ended or vanished, or the reset policy says its time is up."""
        now = time.time()
        # The common case, a live session with no reset due, is a read.
        current = await self._store.read(lambda c: bindings.lookup(c, key))
        if current is not None and _live(current) and reset_reason(self._policy, _last_active(current), now) is None:
            return Binding(key, current.session_id, created=False)

        def op(conn: sqlite3.Connection) -> Binding:
            row = bindings.lookup(conn, key)  # again, under the write lock
            previous: str | None = None
            reason: str | None = None
            if row is not None and _live(row):
                reason = reset_reason(self._policy, _last_active(row), now)
                if reason is None:
                    return Binding(key, row.session_id, created=False)
                previous = row.session_id
                ops.end_session(conn, previous, f"session_reset:{reason}", at=now)
            elif row is not None:
                previous = row.session_id  # stale: ended or deleted elsewhere
            session_id = _new_id(msg)
            ops.create_session(conn, session_id, msg.platform, model=model, user_id=msg.user_id, started_at=now)
            _bind(conn, key, session_id, msg, now)
            note = _apply_pending_title(conn, key, session_id, now)
            return Binding(key, session_id, created=True, reset_reason=reason, previous_session_id=previous,
                           title_note=note)

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
            row = bindings.lookup(conn, key)
            previous = None
            if row is not None and row.session_exists:
                previous = row.session_id
                if row.ended_at is None:
                    ops.end_session(conn, previous, end_reason, at=now)
            session_id = _new_id(msg)
            ops.create_session(conn, session_id, msg.platform, model=model, user_id=msg.user_id, started_at=now)
            _bind(conn, key, session_id, msg, now)
            note = _apply_pending_title(conn, key, session_id, now)
            return Binding(key, session_id, created=True, previous_session_id=previous, title_note=note)

        return await self._store.write(op)

    async def unbind(self, key: str, session_id: str) -> bool:
        """Detach a key from a session (the source of a finished /handoff), only if
        it still points there; its next message starts a fresh session."""
        return bool(await self._store.write(lambda c: bindings.unbind(c, key, session_id)))

    async def queue_title(self, key: str, title: str) -> None:
        """Hold a title for the session this key has not started yet. It reserves
        nothing (whoever starts a session with the name first gets it) and expires
        after ``PENDING_TITLE_TTL``; expired ones are swept here, where they arise."""
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            bindings.sweep_pending_titles(conn, queued_before=now - PENDING_TITLE_TTL)
            bindings.queue_title(conn, key, title, now=now)

        await self._store.write(op)

    async def pending_title(self, key: str) -> str | None:
        cutoff = time.time() - PENDING_TITLE_TTL
        return await self._store.read(lambda c: bindings.pending_title(c, key, queued_since=cutoff))

    async def forget_pending_title(self, key: str) -> None:
        """Drop a queued title whose chat ended (a terminal chat closes with its connection)."""
        await self._store.write(lambda c: bindings.forget_pending_title(c, key))

    # ------------------------------------------------------------- handoff

    async def bind_for_handoff(self, key: str, session_id: str, msg: InboundMessage) -> PriorBinding:
        """``rebind``, returning what the key pointed at before (for ``restore``)."""
        now = time.time()

        def op(conn: sqlite3.Connection) -> PriorBinding:
            bound = bindings.bound_session(conn, key)
            remembered = bindings.was_bound(conn, key, session_id)
            ops.reopen_session(conn, session_id)
            _bind(conn, key, session_id, msg, now)
            if bound is None:
                return PriorBinding(None, None, remembered)
            return PriorBinding(bound[0], bound[1], remembered)

        return await self._store.write(op)

    async def restore(self, key: str, session_id: str, prior: PriorBinding) -> bool:
        """Undo ``bind_for_handoff`` if the key still points at ``session_id``: back to the
        session it had (as it was), or unbound when it had none. True if anything changed."""

        def op(conn: sqlite3.Connection) -> bool:
            if not prior.remembered:  # this chat never had the session: it gains no claim on it
                bindings.forget_binding(conn, key, session_id)
            if prior.session_id is None:
                return bindings.unbind(conn, key, session_id)
            return bindings.repoint(conn, key, session_id, prior.session_id, prior.updated_at)

        return bool(await self._store.write(op))
