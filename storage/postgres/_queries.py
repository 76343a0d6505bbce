"""Read queries on sessions and messages: the SQLite backend's ``queries`` in PostgreSQL.

Results come in state.db's order. Where SQLite sorts text, the text sorts by code point
(``COLLATE "C"``) whatever the database's locale; NULLs sort where SQLite puts them (first
ascending, last descending); sessions that started at the same instant come in the order they
were stored (SQLite's rowid, ``gateway_session_order`` here).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._messages import JSON_FIELDS
from .._messages import decode_json as _decode
from .._messages import to_conversation_message as to_conversation_message
from .._model import ChatOwner
from .._text import split_lineage_title
from ..errors import AmbiguousSessionError, SessionNotFoundError
from ._conn import PgConnection
from ._queries_more import OWNED_SQL as _OWNED_SQL
from ._queries_more import SEQ as _SEQ
from ._queries_more import C as _C
from ._queries_more import ascii_lower as _ascii_lower
from ._queries_more import ascii_lower_sql as _ascii_lower_sql
from ._queries_more import attachments_of as _attachments_of
from ._queries_more import escape_like as _escape_like
from ._queries_more import owned_params as _owned_params

# What a prune deletes is a read too (as in the SQLite backend, re-exported here).
from ._queries_more import prunable_session_ids as prunable_session_ids
from ._queries_more import prune_plan as prune_plan
from ._queries_more import row_dict as _row_dict
from ._queries_more import superseded_ids as _superseded_ids

#: the reference v11 columns of messages, in state.db's order
_MESSAGE_COLUMNS = ("id, session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, "
                   "finish_reason, reasoning, reasoning_content, reasoning_details, codex_reasoning_items, "
                   "codex_message_items")
_CONVERSATION_ROLES = ("user", "assistant", "tool")


@contextmanager
def snapshot(conn: PgConnection) -> Iterator[PgConnection]:
    """Several reads that see one state of the database, as SQLite's BEGIN … COMMIT on a reader.

    A read's transaction is READ COMMITTED (each statement sees its own snapshot). In a read the
    block runs in a REPEATABLE READ transaction of its own, begun here (reads before it, like
    SQLite's autocommitted ones, saw their own state); the reads after it see the newest state
    again. In a write, the transaction becomes REPEATABLE READ, which PostgreSQL allows only
    before its first query (SQLite refuses a snapshot inside a write altogether)."""
    # SHOW takes no snapshot, so SET TRANSACTION is still allowed after it.
    row = conn.execute("SHOW transaction_read_only").fetchone()
    if row is None or row[0] != "on":
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield conn
        return
    conn.execute("COMMIT")  # a read-only transaction: nothing to lose
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    yield conn
    # not on an error: the store rolls the transaction back
    conn.execute("COMMIT")
    conn.execute("BEGIN READ ONLY")


def _has_nul(text: str) -> bool:
    """PostgreSQL's text holds no NUL character: a lookup of one finds nothing (as in state.db,
    where no id or title has one) rather than failing."""
    return "\x00" in text


# ---------------------------------------------------------------- sessions


def get_session(conn: PgConnection, session_id: str) -> dict[str, Any] | None:
    if _has_nul(session_id):
        return None
    row = conn.execute("SELECT * FROM sessions WHERE id = %s", (session_id,)).fetchone()
    return None if row is None else _row_dict(row)


def resolve_session_id(conn: PgConnection, id_or_prefix: str) -> str:
    """A full id, or a prefix that matches exactly one session (ASCII case ignored, as SQLite's
    LIKE does)."""
    if not _has_nul(id_or_prefix) and conn.execute("SELECT 1 FROM sessions WHERE id = %s",
                                                   (id_or_prefix,)).fetchone():
        return id_or_prefix
    if not id_or_prefix:
        raise SessionNotFoundError("No session id given.")
    if _has_nul(id_or_prefix):
        raise SessionNotFoundError(f"No session id starts with '{id_or_prefix}'.")
    rows = conn.execute(
        f"SELECT id FROM sessions s WHERE {_ascii_lower_sql('s.id')} LIKE %s ESCAPE '\\' "
        f"ORDER BY s.started_at DESC, {_SEQ.format(alias='s')} LIMIT 11",
        (_ascii_lower(_escape_like(id_or_prefix)) + "%",),
    ).fetchall()
    if not rows:
        raise SessionNotFoundError(f"No session id starts with '{id_or_prefix}'.")
    if len(rows) > 1:
        raise AmbiguousSessionError(id_or_prefix, [r[0] for r in rows])
    return str(rows[0][0])


def resolve_session_by_title(conn: PgConnection, title: str) -> str | None:
    """The most recent session of the title's lineage (``X``, ``X #2``, ...)."""
    if _has_nul(title):
        return None
    base, _ = split_lineage_title(title)
    exact = conn.execute("SELECT id FROM sessions WHERE title = %s", (title,)).fetchone()
    # Case-sensitive LIKE where SQLite's ignores ASCII case: the lineage is filtered on the
    # exact base below, so the rows kept are the same.
    rows = conn.execute(
        "SELECT id, title, started_at FROM sessions s WHERE title = %s OR title LIKE %s ESCAPE '\\' "
        f"ORDER BY {_SEQ.format(alias='s')}",
        (base, _escape_like(base) + " #%"),
    ).fetchall()
    lineage = [r for r in rows if split_lineage_title(r["title"])[0] == base]
    if lineage and (exact is None or title == base):
        newest = max(lineage, key=lambda r: (split_lineage_title(r["title"])[1], r["started_at"]))
        return str(newest["id"])
    return None if exact is None else str(exact[0])


def title_in_use(conn: PgConnection, title: str) -> bool:
    if _has_nul(title):
        return False
    return conn.execute("SELECT 1 FROM sessions WHERE title = %s", (title,)).fetchone() is not None


def latest_session_id(conn: PgConnection, source: str) -> str | None:
    """The most recently started session from ``source``."""
    row = conn.execute(
        f"SELECT id FROM sessions s WHERE source = %s ORDER BY started_at DESC, {_SEQ.format(alias='s')} LIMIT 1",
        (source,),
    ).fetchone()
    return None if row is None else str(row[0])


def count_sessions(conn: PgConnection, source: str | None = None) -> int:
    """All sessions, or those from ``source``."""
    if source:
        row = conn.execute("SELECT COUNT(*) FROM sessions WHERE source = %s", (source,)).fetchone()
    else:
        row = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()
    return 0 if row is None else int(row[0])


def lineage_ancestors(conn: PgConnection, session_id: str) -> list[dict[str, Any]]:
    """The session and its parents, nearest first."""
    rows = conn.execute(
        """
        WITH RECURSIVE lineage(id, title, started_at, parent_session_id, depth) AS (
            SELECT id, title, started_at, parent_session_id, 0 FROM sessions WHERE id = %s
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


def lineage_descendants(conn: PgConnection, session_id: str) -> list[dict[str, Any]]:
    """The session and every session continued from it, breadth first."""
    rows = conn.execute(
        f"""
        WITH RECURSIVE descendants(id, title, started_at, parent_session_id, depth) AS (
            SELECT id, title, started_at, parent_session_id, 0 FROM sessions WHERE id = %s
            UNION ALL
            SELECT s.id, s.title, s.started_at, s.parent_session_id, d.depth + 1
            FROM sessions s JOIN descendants d ON s.parent_session_id = d.id
            WHERE d.depth < 10000
        )
        SELECT id, title, started_at, parent_session_id FROM descendants d
        ORDER BY depth, started_at, {_SEQ.format(alias='d')}
        """,
        (session_id,),
    ).fetchall()
    return [_row_dict(r) for r in rows]


def recent_sessions(
    conn: PgConnection,
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
        where.append(f"s.id IN ({_OWNED_SQL})")
        params.extend(_owned_params(owner))
    if source:
        where.append("s.source = %s")
        params.append(source)
    if user_id is not None:
        where.append("s.user_id = %s")
        params.append(user_id)
    if session_ids is not None:
        where.append("s.id = ANY(%s)")  # `IN ()` of no ids is no SQL here; ANY of an empty list is
        params.append(list(session_ids))
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
        ORDER BY s.started_at DESC, {_SEQ.format(alias='s')}
        LIMIT %s
    """
    params.append(limit if limit >= 0 else None)  # SQLite: a negative LIMIT is no limit
    return [_row_dict(r) for r in conn.execute(sql, params)]


_TOTAL = "(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0))"


def token_stats(conn: PgConnection, *, top: int = 10) -> dict[str, list[dict[str, Any]]]:
    by_model = conn.execute(
        f"""
        SELECT model, COUNT(*) AS session_count, SUM(input_tokens)::bigint AS total_input,
               SUM(output_tokens)::bigint AS total_output, SUM(cache_read_tokens)::bigint AS total_cache_read,
               SUM(cache_write_tokens)::bigint AS total_cache_write,
               SUM(reasoning_tokens)::bigint AS total_reasoning,
               SUM(api_call_count)::bigint AS total_api_calls, SUM(estimated_cost_usd) AS total_cost
        FROM sessions WHERE model IS NOT NULL GROUP BY model
        ORDER BY total_cost DESC NULLS LAST, model {_C}
        """
    ).fetchall()
    # Ties in stored order: a hash join costs about what the scan does whatever the totals are,
    # where a lookup per row would cost far more when most sessions tie (all zero, say).
    heaviest = conn.execute(
        f"""
        SELECT id, title, model, {_TOTAL} AS total_tokens, estimated_cost_usd
        FROM sessions s LEFT JOIN gateway_session_order o ON o.session_id = s.id
        ORDER BY total_tokens DESC, o.seq LIMIT %s
        """,
        (top if top >= 0 else None,),
    ).fetchall()
    return {"by_model": [_row_dict(r) for r in by_model], "top_sessions": [_row_dict(r) for r in heaviest]}


def stats(conn: PgConnection, db_path: Path | None = None) -> dict[str, Any]:
    """Totals and sessions per source; ``db_size_bytes`` is the database's size on its server
    (``db_path``, state.db's file, means nothing here and is not read)."""
    total_sessions = _scalar(conn, "SELECT COUNT(*) FROM sessions")
    total_messages = _scalar(conn, "SELECT COUNT(*) FROM messages")
    by_source = {
        r[0]: int(r[1])
        for r in conn.execute(f"SELECT source, COUNT(*) FROM sessions GROUP BY source ORDER BY COUNT(*) DESC, source {_C}")
    }
    return {
        "total_sessions": total_sessions,
        "total_messages": total_messages,
        "by_source": by_source,
        "db_size_bytes": _scalar(conn, "SELECT pg_database_size(current_database())"),
    }


def _scalar(conn: PgConnection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


# ---------------------------------------------------------------- messages


def get_messages(conn: PgConnection, session_id: str) -> list[dict[str, Any]]:
    # the v11 columns by name: messages also holds search's generated columns (migration 0003)
    rows = conn.execute(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = %s ORDER BY id",
                        (session_id,)).fetchall()
    out = []
    for row in rows:
        d = _row_dict(row)
        for key in JSON_FIELDS:
            d[key] = _decode(d[key])
        out.append(d)
    return out


def get_messages_as_conversation(conn: PgConnection, session_id: str) -> list[dict[str, Any]]:
    """OpenAI chat format for replaying a session to a model (without the answers a /retry replaced)."""
    hidden = _superseded_ids(conn, session_id)
    return [to_conversation_message(r) for r in get_messages(conn, session_id)
            if r["role"] in _CONVERSATION_ROLES and r["id"] not in hidden]


def message_count(conn: PgConnection, session_id: str) -> int:
    row = conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = %s", (session_id,)).fetchone()
    return 0 if row is None else int(row[0])


def recent_dialogue(conn: PgConnection, session_id: str, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` user and assistant messages (role, content, tool_calls as stored), oldest first."""
    hidden = _superseded_ids(conn, session_id)
    wanted = limit + len(hidden)
    rows = conn.execute(
        "SELECT id, role, content, tool_calls FROM messages WHERE session_id = %s AND role IN ('user', 'assistant') "
        "ORDER BY id DESC LIMIT %s",
        (session_id, wanted if wanted >= 0 else None),
    ).fetchall()
    kept = [r for r in rows if r["id"] not in hidden][:limit]
    return [{k: r[k] for k in ("role", "content", "tool_calls")} for r in reversed(kept)]


def iter_export(conn: PgConnection, *, source: str | None = None,
                session_id: str | None = None) -> Iterator[dict[str, Any]]:
    """Sessions with their messages, one dict at a time (memory stays flat)."""
    sql = "SELECT id FROM sessions"
    params: list[Any] = []
    if session_id is not None:
        sql += " WHERE id = %s"
        params.append(session_id)
    elif source:
        sql += " WHERE source = %s"
        params.append(source)
    sql += f" ORDER BY started_at, id {_C}"
    ids = [r[0] for r in conn.execute(sql, params)]
    for sid in ids:
        session = get_session(conn, sid)
        if session is None:  # deleted meanwhile
            continue
        session["messages"] = get_messages(conn, sid)
        session["attachments"] = _attachments_of(conn, sid)
        yield session


def export_session(conn: PgConnection, session_id: str) -> dict[str, Any] | None:
    return next(iter_export(conn, session_id=session_id), None)


def export_all(conn: PgConnection, *, source: str | None = None) -> list[dict[str, Any]]:
    return list(iter_export(conn, source=source))
