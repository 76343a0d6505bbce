"""One sender's data: which sessions they took part in, and what of them is theirs.

A sender is (platform, user id). Their sessions are found three ways:

- the binding history (``gateway_session_bindings``): every session a key was bound to, with
  the user whose message bound it;
- ``sessions.source`` / ``sessions.user_id`` of the sessions their messages started;
- ``gateway_message_senders`` (gateway step 13): the sender of each user message stored since.

A session is *theirs alone* when every key it was ever bound to is theirs alone (their DM, or
their own session in a group: ``group_sessions_per_user``; a key is theirs once a message of
theirs bound it, so a compression's continuation bound to it later is theirs too) and no other
person's message is recorded in it; the sessions of their scheduled jobs' runs are theirs too. Every other session
they are found in is *shared*, and only their own messages in it are theirs: those with a
sender row naming them. A shared session's messages stored before step 13 name nobody and are
not found (the README says so).

Functions of a connection; the export reads them on one read connection, in one read
transaction, row by row (``iter_messages`` never holds a session's messages at once).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from .._model import CronJobRow
from .._senders import SenderSession
from ._attachments import for_messages
from ._cron import _JOB_COLUMNS, _job

__all__ = ["dm_chat", "is_alone_key", "iter_messages", "jobs_of", "keys_of", "own_message_ids", "record_sender",
           "sessions_of"]

#: rows fetched per step of an export's read (memory stays bounded whatever the history)
BATCH = 500


def _escape(segment: str) -> str:
    # As the gateway writes a key's segments (``gateway.routing.session_key``).
    return segment.replace("%", "%25").replace(":", "%3A")


def is_alone_key(session_key: str, platform: str, user_id: str, bound_by: str | None) -> bool:
    """Whether a key bound by ``bound_by`` is the sender's alone: a DM key they bound, or a
    group key whose last segment is them (a per-user session)."""
    if bound_by != user_id:
        return False
    p = _escape(platform)
    if f":{p}:dm:" in session_key or session_key == f"{p}:{_escape(user_id)}":  # cli jobs' key: cli:<user>
        return True
    return (f":{p}:group:" in session_key or f":{p}:channel:" in session_key) \
        and session_key.endswith(":" + _escape(user_id))


def record_sender(conn: sqlite3.Connection, session_id: str, platform: str, user_id: str | None) -> None:
    """The session's latest message was sent by (platform, user id): run in the transaction that
    stored it (the question's)."""
    if not user_id:
        return
    conn.execute(
        "INSERT OR IGNORE INTO gateway_message_senders (message_id, session_id, platform, user_id) "
        "SELECT id, session_id, ?, ? FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT 1",
        (platform, user_id, session_id),
    )


def _alone_keys(conn: sqlite3.Connection, platform: str, user_id: str) -> set[str]:
    """The keys that are the sender's alone: their DM's, their own in groups (bound by them at least
    once; later bindings of the same key without a message, as a compression's, count as theirs)."""
    rows = conn.execute(
        "SELECT session_key FROM gateway_session_bindings WHERE platform = ? AND user_id = ? "
        "UNION SELECT session_key FROM gateway_session_index WHERE platform = ? AND user_id = ?",
        (platform, user_id, platform, user_id)).fetchall()
    return {str(r[0]) for r in rows if is_alone_key(str(r[0]), platform, user_id, user_id)}


def _candidates(conn: sqlite3.Connection, platform: str, user_id: str, alone_keys: set[str]) -> set[str]:
    found: set[str] = set()
    for sql, params in (
        ("SELECT session_id FROM gateway_session_bindings WHERE platform = ? AND user_id = ?", (platform, user_id)),
        ("SELECT session_id FROM gateway_session_index WHERE platform = ? AND user_id = ?", (platform, user_id)),
        ("SELECT id FROM sessions WHERE source = ? AND user_id = ?", (platform, user_id)),
        ("SELECT DISTINCT session_id FROM gateway_message_senders WHERE platform = ? AND user_id = ?",
         (platform, user_id)),
    ):
        found.update(str(r[0]) for r in conn.execute(sql, params))
    for key in alone_keys:
        found.update(str(r[0]) for r in conn.execute(
            "SELECT session_id FROM gateway_session_bindings WHERE session_key = ?", (key,)))
    return found


def _cron_sessions(conn: sqlite3.Connection, platform: str, user_id: str) -> set[str]:
    return {str(r[0]) for r in conn.execute(
        "SELECT r.session_id FROM gateway_cron_runs r JOIN gateway_cron_jobs j ON j.id = r.job_id "
        "WHERE j.owner_platform = ? AND j.owner_user_id = ? AND r.session_id IS NOT NULL", (platform, user_id))}


def _alone(conn: sqlite3.Connection, session_id: str, platform: str, user_id: str, alone_keys: set[str]) -> bool:
    others = conn.execute(
        "SELECT 1 FROM gateway_message_senders WHERE session_id = ? AND NOT (platform = ? AND user_id = ?) LIMIT 1",
        (session_id, platform, user_id)).fetchone()
    if others is not None:
        return False
    keys = {str(r[0]) for r in conn.execute(
        "SELECT session_key FROM gateway_session_bindings WHERE session_id = ? "
        "UNION SELECT session_key FROM gateway_session_index WHERE session_id = ?", (session_id, session_id))}
    if keys:
        return keys <= alone_keys
    # Never bound to a chat key (a terminal session, a compression's continuation not bound yet):
    # theirs when they started it.
    row = conn.execute("SELECT 1 FROM sessions WHERE id = ? AND source = ? AND user_id = ?",
                       (session_id, platform, user_id)).fetchone()
    return row is not None


def sessions_of(conn: sqlite3.Connection, platform: str, user_id: str) -> list[SenderSession]:
    """Every session the sender took part in, oldest first, each marked theirs alone or shared."""
    cron = _cron_sessions(conn, platform, user_id)
    alone_keys = _alone_keys(conn, platform, user_id)
    candidates = _candidates(conn, platform, user_id, alone_keys) | cron
    out: list[SenderSession] = []
    for sid in candidates:
        row = conn.execute("SELECT id, source, title, started_at, ended_at FROM sessions WHERE id = ?",
                           (sid,)).fetchone()
        if row is None:  # a stale binding of a deleted session
            continue
        alone = sid in cron or _alone(conn, sid, platform, user_id, alone_keys)
        out.append(SenderSession(str(row["id"]), str(row["source"]), row["title"], float(row["started_at"]),
                                 None if row["ended_at"] is None else float(row["ended_at"]), alone))
    out.sort(key=lambda s: (s.started_at, s.session_id))
    return out


def own_message_ids(conn: sqlite3.Connection, session_id: str, platform: str, user_id: str) -> list[int]:
    """The sender's own messages in a shared session (those with a sender row naming them)."""
    return [int(r[0]) for r in conn.execute(
        "SELECT message_id FROM gateway_message_senders WHERE session_id = ? AND platform = ? AND user_id = ? "
        "ORDER BY message_id", (session_id, platform, user_id))]


def iter_messages(conn: sqlite3.Connection, session_id: str, *,
                  only: tuple[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """The session's messages in order, ``BATCH`` rows at a time, each with its attachments'
    metadata; ``only`` (platform, user id): just that sender's own messages."""
    after = 0
    while True:
        if only is None:
            rows = conn.execute(
                "SELECT id, role, content, tool_name, tool_call_id, timestamp FROM messages "
                "WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?", (session_id, after, BATCH)).fetchall()
        else:
            rows = conn.execute(
                "SELECT m.id, m.role, m.content, m.tool_name, m.tool_call_id, m.timestamp FROM messages m "
                "JOIN gateway_message_senders s ON s.message_id = m.id "
                "WHERE m.session_id = ? AND s.platform = ? AND s.user_id = ? AND m.id > ? ORDER BY m.id LIMIT ?",
                (session_id, only[0], only[1], after, BATCH)).fetchall()
        if not rows:
            return
        files = for_messages(conn, [int(r[0]) for r in rows])
        for r in rows:
            mid = int(r[0])
            item: dict[str, Any] = {"id": mid, "role": r[1], "timestamp": float(r[5]), "content": r[2]}
            if r[3] is not None:
                item["tool_name"] = r[3]
            if mid in files:
                item["attachments"] = [
                    {"kind": a.kind, "mime": a.mime, "name": a.name, "size": a.size, "sha256": a.sha256,
                     "description": a.description, "created_at": a.created_at} for a in files[mid]]
            yield item
        after = int(rows[-1][0])


def jobs_of(conn: sqlite3.Connection, platform: str, user_id: str) -> list[CronJobRow]:
    """The sender's scheduled jobs (owned by them on that platform)."""
    rows = conn.execute(f"SELECT {_JOB_COLUMNS} FROM gateway_cron_jobs WHERE owner_platform = ? "
                        "AND owner_user_id = ? ORDER BY created_at, id", (platform, user_id)).fetchall()
    return [_job(r) for r in rows]


def dm_chat(conn: sqlite3.Connection, platform: str, user_id: str) -> str | None:
    """The chat id of the sender's direct messages with the bot, as last seen (None: never seen)."""
    row = conn.execute(
        "SELECT chat_id FROM gateway_session_index WHERE platform = ? AND user_id = ? AND chat_type = 'dm' "
        "AND chat_id IS NOT NULL ORDER BY updated_at DESC LIMIT 1", (platform, user_id)).fetchone()
    return None if row is None else str(row[0])


def keys_of(conn: sqlite3.Connection, platform: str, user_id: str) -> list[str]:
    """The chat keys the sender's messages were routed to (where a turn of theirs may run)."""
    return [str(r[0]) for r in conn.execute(
        "SELECT session_key FROM gateway_session_index WHERE platform = ? AND user_id = ? "
        "UNION SELECT session_key FROM gateway_session_bindings WHERE platform = ? AND user_id = ?",
        (platform, user_id, platform, user_id))]
