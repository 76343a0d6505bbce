"""One sender's data on PostgreSQL: which sessions they took part in, and what of them is theirs.

The same functions and the same rules as SQLite's ``storage.sqlite.userdata`` (its docstring
tells how a sender's sessions are found and which are theirs alone): a sender is (platform, user
id); a session is theirs alone when every key it was bound to is theirs alone and no other
person's message is recorded in it, or when it is a run of their scheduled job. An export reads
these in one read transaction (one snapshot), ``BATCH`` rows at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._model import CronJobRow
from .._senders import SenderSession
from ._conn import PgConnection
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


def record_sender(conn: PgConnection, session_id: str, platform: str, user_id: str | None) -> None:
    """The session's latest message was sent by (platform, user id): run in the transaction that
    stored it (the question's)."""
    if not user_id:
        return
    conn.execute(
        "INSERT INTO gateway_message_senders (message_id, session_id, platform, user_id) "
        "SELECT id, session_id, %s, %s FROM messages WHERE session_id = %s ORDER BY id DESC LIMIT 1 "
        "ON CONFLICT DO NOTHING",
        (platform, user_id, session_id),
    )


def _alone_keys(conn: PgConnection, platform: str, user_id: str) -> set[str]:
    """The keys that are the sender's alone (see ``storage.sqlite.userdata``)."""
    rows = conn.execute(
        "SELECT session_key FROM gateway_session_bindings WHERE platform = %s AND user_id = %s "
        "UNION SELECT session_key FROM gateway_session_index WHERE platform = %s AND user_id = %s",
        (platform, user_id, platform, user_id)).fetchall()
    return {str(r[0]) for r in rows if is_alone_key(str(r[0]), platform, user_id, user_id)}


def _candidates(conn: PgConnection, platform: str, user_id: str, alone_keys: set[str]) -> set[str]:
    found: set[str] = set()
    for sql in (
        "SELECT session_id FROM gateway_session_bindings WHERE platform = %s AND user_id = %s",
        "SELECT session_id FROM gateway_session_index WHERE platform = %s AND user_id = %s",
        "SELECT id FROM sessions WHERE source = %s AND user_id = %s",
        "SELECT DISTINCT session_id FROM gateway_message_senders WHERE platform = %s AND user_id = %s",
    ):
        found.update(str(r[0]) for r in conn.execute(sql, (platform, user_id)).fetchall())
    if alone_keys:
        found.update(str(r[0]) for r in conn.execute(
            "SELECT session_id FROM gateway_session_bindings WHERE session_key = ANY(%s)",
            (sorted(alone_keys),)).fetchall())
    return found


def _cron_sessions(conn: PgConnection, platform: str, user_id: str) -> set[str]:
    return {str(r[0]) for r in conn.execute(
        "SELECT r.session_id FROM gateway_cron_runs r JOIN gateway_cron_jobs j ON j.id = r.job_id "
        "WHERE j.owner_platform = %s AND j.owner_user_id = %s AND r.session_id IS NOT NULL",
        (platform, user_id)).fetchall()}


def _alone(conn: PgConnection, session_id: str, platform: str, user_id: str, alone_keys: set[str]) -> bool:
    others = conn.execute(
        "SELECT 1 FROM gateway_message_senders WHERE session_id = %s AND NOT (platform = %s AND user_id = %s) "
        "LIMIT 1", (session_id, platform, user_id)).fetchone()
    if others is not None:
        return False
    keys = {str(r[0]) for r in conn.execute(
        "SELECT session_key FROM gateway_session_bindings WHERE session_id = %s "
        "UNION SELECT session_key FROM gateway_session_index WHERE session_id = %s",
        (session_id, session_id)).fetchall()}
    if keys:
        return keys <= alone_keys
    # Never bound to a chat key (a terminal session, a compression's continuation not bound yet):
    # theirs when they started it.
    row = conn.execute("SELECT 1 FROM sessions WHERE id = %s AND source = %s AND user_id = %s",
                       (session_id, platform, user_id)).fetchone()
    return row is not None


def sessions_of(conn: PgConnection, platform: str, user_id: str) -> list[SenderSession]:
    """Every session the sender took part in, oldest first, each marked theirs alone or shared."""
    cron = _cron_sessions(conn, platform, user_id)
    alone_keys = _alone_keys(conn, platform, user_id)
    candidates = _candidates(conn, platform, user_id, alone_keys) | cron
    out: list[SenderSession] = []
    for sid in candidates:
        row = conn.execute("SELECT id, source, title, started_at, ended_at FROM sessions WHERE id = %s",
                           (sid,)).fetchone()
        if row is None:  # a stale binding of a deleted session
            continue
        alone = sid in cron or _alone(conn, sid, platform, user_id, alone_keys)
        out.append(SenderSession(str(row["id"]), str(row["source"]), row["title"], float(row["started_at"]),
                                 None if row["ended_at"] is None else float(row["ended_at"]), alone))
    out.sort(key=lambda s: (s.started_at, s.session_id))
    return out


def own_message_ids(conn: PgConnection, session_id: str, platform: str, user_id: str) -> list[int]:
    """The sender's own messages in a shared session (those with a sender row naming them)."""
    return [int(r[0]) for r in conn.execute(
        "SELECT message_id FROM gateway_message_senders WHERE session_id = %s AND platform = %s AND user_id = %s "
        "ORDER BY message_id", (session_id, platform, user_id)).fetchall()]


def _files_of(conn: PgConnection, message_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """message id -> its files' metadata, in stored order (an export's view of ``gateway_attachments``)."""
    found: dict[int, list[dict[str, Any]]] = {}
    for r in conn.execute(
            "SELECT message_id, kind, mime, name, size, sha256, description, created_at FROM gateway_attachments "
            "WHERE message_id = ANY(%s) ORDER BY id", (message_ids,)).fetchall():
        found.setdefault(int(r[0]), []).append(
            {"kind": str(r[1]), "mime": r[2], "name": r[3], "size": int(r[4]), "sha256": str(r[5]),
             "description": r[6], "created_at": float(r[7])})
    return found


def iter_messages(conn: PgConnection, session_id: str, *,
                  only: tuple[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """The session's messages in order, ``BATCH`` rows at a time, each with its attachments'
    metadata; ``only`` (platform, user id): just that sender's own messages."""
    after = 0
    while True:
        if only is None:
            rows = conn.execute(
                "SELECT id, role, content, tool_name, tool_call_id, timestamp FROM messages "
                "WHERE session_id = %s AND id > %s ORDER BY id LIMIT %s", (session_id, after, BATCH)).fetchall()
        else:
            rows = conn.execute(
                "SELECT m.id, m.role, m.content, m.tool_name, m.tool_call_id, m.timestamp FROM messages m "
                "JOIN gateway_message_senders s ON s.message_id = m.id "
                "WHERE m.session_id = %s AND s.platform = %s AND s.user_id = %s AND m.id > %s ORDER BY m.id LIMIT %s",
                (session_id, only[0], only[1], after, BATCH)).fetchall()
        if not rows:
            return
        files = _files_of(conn, [int(r[0]) for r in rows])
        for r in rows:
            mid = int(r[0])
            item: dict[str, Any] = {"id": mid, "role": r[1], "timestamp": float(r[5]), "content": r[2]}
            if r[3] is not None:
                item["tool_name"] = r[3]
            if mid in files:
                item["attachments"] = files[mid]
            yield item
        after = int(rows[-1][0])


def jobs_of(conn: PgConnection, platform: str, user_id: str) -> list[CronJobRow]:
    """The sender's scheduled jobs (owned by them on that platform)."""
    rows = conn.execute(f"SELECT {_JOB_COLUMNS} FROM gateway_cron_jobs WHERE owner_platform = %s "
                        "AND owner_user_id = %s ORDER BY created_at, id COLLATE \"C\"", (platform, user_id)).fetchall()
    return [_job(r) for r in rows]


def dm_chat(conn: PgConnection, platform: str, user_id: str) -> str | None:
    """The chat id of the sender's direct messages with the bot, as last seen (None: never seen)."""
    row = conn.execute(
        "SELECT chat_id FROM gateway_session_index WHERE platform = %s AND user_id = %s AND chat_type = 'dm' "
        "AND chat_id IS NOT NULL ORDER BY updated_at DESC LIMIT 1", (platform, user_id)).fetchone()
    return None if row is None else str(row[0])


def keys_of(conn: PgConnection, platform: str, user_id: str) -> list[str]:
    """The chat keys the sender's messages were routed to (where a turn of theirs may run)."""
    return [str(r[0]) for r in conn.execute(
        "SELECT session_key FROM gateway_session_index WHERE platform = %s AND user_id = %s "
        "UNION SELECT session_key FROM gateway_session_bindings WHERE platform = %s AND user_id = %s",
        (platform, user_id, platform, user_id)).fetchall()]
