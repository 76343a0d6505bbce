"""Read queries on sessions and messages: plain functions of a (read-only) connection.

Full-text search is in ``_search``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._messages import JSON_FIELDS, decode_json
from .._messages import to_conversation_message as to_conversation_message
from .._model import ChatOwner
from .._text import split_lineage_title
from ..errors import AmbiguousSessionError, SessionNotFoundError
from ._attachments import for_session
from ._history import superseded_ids
from ._ownership import owned_ids_sql

# What a prune deletes is a read too; it lives beside the rule that explains it.
from ._prune import prunable_session_ids as prunable_session_ids
from ._prune import prune_plan as prune_plan
from ._rows import escape_like as _escape_like
from ._rows import row_dict as _row_dict

_CONVERSATION_ROLES = ("user", "assistant", "tool")


@contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Several reads on a read-only connection that see one state of the database."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


# ---------------------------------------------------------------- sessions


def get_session(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else _row_dict(row)


def resolve_session_id(conn: sqlite3.Connection, id_or_prefix: str) -> str:
    """A full id, or a prefix that matches exactly one session."""
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (id_or_prefix,)).fetchone():
        return id_or_prefix
    if not id_or_prefix:
        raise SessionNotFoundError("No session id given.")
    rows = conn.execute(
        "SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' ORDER BY started_at DESC LIMIT 11",
        (_escape_like(id_or_prefix) + "%",),
    ).fetchall()
    if not rows:
        raise SessionNotFoundError(f"No session id starts with '{id_or_prefix}'.")
    if len(rows) > 1:
        raise AmbiguousSessionError(id_or_prefix, [r[0] for r in rows])
    return str(rows[0][0])


def resolve_session_by_title(conn: sqlite3.Connection, title: str) -> str | None:
    """The most recent session of the title's lineage (``X``, ``X #2``, ...)."""
    base, _ = split_lineage_title(title)
    exact = conn.execute("SELECT id FROM sessions WHERE title = ?", (title,)).fetchone()
    rows = conn.execute(
        "SELECT id, title, started_at FROM sessions WHERE title = ? OR title LIKE ? ESCAPE '\\'",
        (base, _escape_like(base) + " #%"),
    ).fetchall()
    lineage = [r for r in rows if split_lineage_title(r["title"])[0] == base]
    if lineage and (exact is None or title == base):
        newest = max(lineage, key=lambda r: (split_lineage_title(r["title"])[1], r["started_at"]))
        return str(newest["id"])
    return None if exact is None else str(exact[0])


def title_in_use(conn: sqlite3.Connection, title: str) -> bool:
    return conn.execute("SELECT 1 FROM sessions WHERE title = ?", (title,)).fetchone() is not None


def latest_session_id(conn: sqlite3.Connection, source: str) -> str | None:
    """The most recently started session from ``source``."""
    row = conn.execute(
        "SELECT id FROM sessions WHERE source = ? ORDER BY started_at DESC LIMIT 1", (source,)
    ).fetchone()
    return None if row is None else str(row[0])


def count_sessions(conn: sqlite3.Connection, source: str | None = None) -> int:
    """All sessions, or those from ``source``."""
    if source:
        return int(conn.execute("SELECT COUNT(*) FROM sessions WHERE source = ?", (source,)).fetchone()[0])
    return int(conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])


def lineage_ancestors(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    """The session and its parents, nearest first."""
    rows = conn.execute(
        """
        WITH RECURSIVE lineage(id, title, started_at, parent_session_id, depth) AS (
            SELECT id, title, started_at, parent_session_id, 0 FROM sessions WHERE id = ?
            UNION ALL
            SELECT s.id, s.title, s.started_at, s.parent_session_id, l.depth + 1
            FROM sessions s JOIN lineage l ON s.id = l.parent_session_id
            WHERE l.depth < 10000
        )
        SELECT id, title, started_at, parent_session_id FROM lineage ORDER BY depth
        """,
        (session_id,),
    ).fetchall()
    return [_row_dict(r) for r in rows]


def lineage_descendants(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    """The session and every session continued from it, breadth first."""
    rows = conn.execute(
        """
        WITH RECURSIVE descendants(id, title, started_at, parent_session_id, depth) AS (
            SELECT id, title, started_at, parent_session_id, 0 FROM sessions WHERE id = ?
            UNION ALL
            SELECT s.id, s.title, s.started_at, s.parent_session_id, d.depth + 1
            FROM sessions s JOIN descendants d ON s.parent_session_id = d.id
            WHERE d.depth < 10000
        )
        SELECT id, title, started_at, parent_session_id FROM descendants ORDER BY depth, started_at
        """,
        (session_id,),
    ).fetchall()
    return [_row_dict(r) for r in rows]


def recent_sessions(
    conn: sqlite3.Connection,
    *,
    limit: int = 20,
    source: str | None = None,
    user_id: str | None = None,
    session_ids: Sequence[str] | None = None,
    owner: ChatOwner | None = None,
) -> list[dict[str, Any]]:
    """Newest first, each with a 63-char preview of its first user message and last_active;
    ``owner`` keeps only the sessions that chat may resume."""
    where: list[str] = []
    params: list[Any] = []
    if owner is not None:
        owned, owned_params = owned_ids_sql(owner)
        where.append(f"s.id IN ({owned})")
        params.extend(owned_params)
    if source:
        where.append("s.source = ?")
        params.append(source)
    if user_id is not None:
        where.append("s.user_id = ?")
        params.append(user_id)
    if session_ids is not None:
        where.append(f"s.id IN ({','.join('?' * len(session_ids))})")
        params.extend(session_ids)
    sql = f"""
        SELECT s.*,
            COALESCE(
                (SELECT SUBSTR(m.content, 1, 63) FROM messages m
                 WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL
                 ORDER BY m.timestamp, m.id LIMIT 1),
                '') AS preview,
            COALESCE((SELECT MAX(m2.timestamp) FROM messages m2 WHERE m2.session_id = s.id),
                     s.started_at) AS last_active
        FROM sessions s
        {"WHERE " + " AND ".join(where) if where else ""}
        ORDER BY s.started_at DESC
        LIMIT ?
    """
    params.append(limit)
    return [_row_dict(r) for r in conn.execute(sql, params)]


def token_stats(conn: sqlite3.Connection, *, top: int = 10) -> dict[str, list[dict[str, Any]]]:
    by_model = conn.execute(
        """
        SELECT model, COUNT(*) AS session_count, SUM(input_tokens) AS total_input,
               SUM(output_tokens) AS total_output, SUM(cache_read_tokens) AS total_cache_read,
               SUM(cache_write_tokens) AS total_cache_write, SUM(reasoning_tokens) AS total_reasoning,
               SUM(api_call_count) AS total_api_calls, SUM(estimated_cost_usd) AS total_cost
        FROM sessions WHERE model IS NOT NULL GROUP BY model ORDER BY total_cost DESC, model
        """
    ).fetchall()
    heaviest = conn.execute(
        """
        SELECT id, title, model, COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0) AS total_tokens,
               estimated_cost_usd
        FROM sessions ORDER BY total_tokens DESC LIMIT ?
        """,
        (top,),
    ).fetchall()
    return {"by_model": [_row_dict(r) for r in by_model], "top_sessions": [_row_dict(r) for r in heaviest]}


def stats(conn: sqlite3.Connection, db_path: Path | None = None) -> dict[str, Any]:
    total_sessions = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    total_messages = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    by_source = {
        r[0]: r[1]
        for r in conn.execute("SELECT source, COUNT(*) FROM sessions GROUP BY source ORDER BY COUNT(*) DESC, source")
    }
    size = 0
    if db_path is not None:
        for suffix in ("", "-wal"):
            try:
                size += Path(str(db_path) + suffix).stat().st_size
            except OSError:
                pass
    return {
        "total_sessions": total_sessions,
        "total_messages": total_messages,
        "by_source": by_source,
        "db_size_bytes": size,
    }


# ---------------------------------------------------------------- messages


def get_messages(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT * FROM messages WHERE session_id = ? ORDER BY id", (session_id,)).fetchall()
    out = []
    for row in rows:
        d = _row_dict(row)
        for key in JSON_FIELDS:
            d[key] = decode_json(d[key])
        out.append(d)
    return out


def get_messages_as_conversation(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    """OpenAI chat format for replaying a session to a model (without the answers a /retry replaced)."""
    hidden = superseded_ids(conn, session_id)
    return [to_conversation_message(r) for r in get_messages(conn, session_id)
            if r["role"] in _CONVERSATION_ROLES and r["id"] not in hidden]


def message_count(conn: sqlite3.Connection, session_id: str) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0])


def recent_dialogue(conn: sqlite3.Connection, session_id: str, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` user and assistant messages (role, content, tool_calls as stored), oldest first."""
    hidden = superseded_ids(conn, session_id)
    rows = conn.execute(
        "SELECT id, role, content, tool_calls FROM messages WHERE session_id = ? AND role IN ('user', 'assistant') "
        "ORDER BY id DESC LIMIT ?",
        (session_id, limit + len(hidden)),
    ).fetchall()
    kept = [r for r in rows if r["id"] not in hidden][:limit]
    return [{k: r[k] for k in ("role", "content", "tool_calls")} for r in reversed(kept)]


def iter_export(conn: sqlite3.Connection, *, source: str | None = None,
                session_id: str | None = None) -> Iterator[dict[str, Any]]:
    """Sessions with their messages, one dict at a time (memory stays flat)."""
    sql = "SELECT * FROM sessions"
    params: list[Any] = []
    if session_id is not None:
        sql += " WHERE id = ?"
        params.append(session_id)
    elif source:
        sql += " WHERE source = ?"
        params.append(source)
    sql += " ORDER BY started_at, id"
    ids = [r[0] for r in conn.execute(sql.replace("SELECT *", "SELECT id", 1), params)]
    for sid in ids:
        session = get_session(conn, sid)
        if session is None:  # deleted meanwhile
            continue
        session["messages"] = get_messages(conn, sid)
        session["attachments"] = _attachments_of(conn, sid)
        yield session


def _attachments_of(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    """The files of a session's messages, for an export (their bytes: ``media/<sha256>`` by digest)."""
    try:
        rows = for_session(conn, session_id)
    except sqlite3.OperationalError:  # a file no gateway has opened since before attachments existed
        return []
    return [{"message_id": r.message_id, "kind": r.kind, "mime": r.mime, "name": r.name, "size": r.size,
             "sha256": r.sha256, "description": r.description, "created_at": r.created_at} for r in rows]


def export_session(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    return next(iter_export(conn, session_id=session_id), None)


def export_all(conn: sqlite3.Connection, *, source: str | None = None) -> list[dict[str, Any]]:
    return list(iter_export(conn, source=source))
