"""Read queries: plain functions of a (read-only) connection."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._text import has_cjk, sanitize_fts5_query, split_lineage_title
from .errors import AmbiguousSessionError, SessionNotFoundError

_JSON_FIELDS = ("tool_calls", "reasoning_details", "codex_reasoning_items", "codex_message_items")
_CONVERSATION_ROLES = ("user", "assistant", "tool")
CONTEXT_CHARS = 200


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _decode(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _row_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {key: row[key] for key in row.keys()}


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
) -> list[dict[str, Any]]:
    """Newest first, each with a 63-char preview of its first user message and last_active."""
    where: list[str] = []
    params: list[Any] = []
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
        for key in _JSON_FIELDS:
            d[key] = _decode(d[key])
        out.append(d)
    return out


def to_conversation_message(row: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": row["role"], "content": row["content"]}
    if row.get("tool_call_id"):
        msg["tool_call_id"] = row["tool_call_id"]
    if row["role"] == "tool" and row.get("tool_name"):
        msg["name"] = row["tool_name"]
    if row.get("tool_calls"):
        msg["tool_calls"] = row["tool_calls"]
    if row["role"] == "assistant":
        for key in ("finish_reason", "reasoning", "reasoning_content", "reasoning_details",
                    "codex_reasoning_items", "codex_message_items"):
            if row.get(key) is not None:
                msg[key] = row[key]
    return msg


def get_messages_as_conversation(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    """OpenAI chat format for replaying a session to a model."""
    return [to_conversation_message(r) for r in get_messages(conn, session_id) if r["role"] in _CONVERSATION_ROLES]


def message_count(conn: sqlite3.Connection, session_id: str) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0])


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
        yield session


def export_session(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    return next(iter_export(conn, session_id=session_id), None)


def export_all(conn: sqlite3.Connection, *, source: str | None = None) -> list[dict[str, Any]]:
    return list(iter_export(conn, source=source))


# ------------------------------------------------------------------ search


@dataclass(frozen=True)
class _Plan:
    """How to run one search: an FTS table and its query, or (for one- and
    two-character CJK terms, which no index serves) a boolean LIKE expression."""

    table: str | None
    fts_query: str
    like_sql: str = ""
    like_params: tuple[str, ...] = ()
    first_term: str = ""


_PLAN_TOKEN = re.compile(r'"(?P<term>[^"]*)"(?P<prefix>\*?)|(?P<op>AND|OR|NOT)')


def _like_plan(cleaned: str) -> _Plan:
    parts: list[str] = []
    params: list[str] = []
    first = ""
    for m in _PLAN_TOKEN.finditer(cleaned):
        op = m.group("op")
        if op is not None:
            parts.append({"AND": "AND", "OR": "OR", "NOT": "AND NOT"}[op])
            continue
        term = m.group("term")
        first = first or term
        if parts and parts[-1] not in ("AND", "OR", "AND NOT"):
            parts.append("AND")  # implicit AND between adjacent terms
        pattern = f"%{_escape_like(term)}%"
        parts.append(
            # COALESCE: a NULL column must read as "no match", or NOT would drop the row.
            "(COALESCE(m.content, '') LIKE ? ESCAPE '\\' OR COALESCE(m.tool_name, '') LIKE ? ESCAPE '\\'"
            " OR COALESCE(m.tool_calls, '') LIKE ? ESCAPE '\\')"
        )
        params += [pattern, pattern, pattern]
    return _Plan(None, cleaned, " ".join(parts), tuple(params), first)


def _fts_plan(query: str) -> _Plan | None:
    """None when nothing searchable is left after sanitizing."""
    cleaned = sanitize_fts5_query(query)
    if not cleaned:
        return None
    if not has_cjk(query):
        return _Plan("messages_fts", cleaned)
    # The default tokenizer cannot split CJK text into words; the trigram
    # index finds any substring of three or more characters. Shorter CJK
    # terms match nothing there, so such queries scan with LIKE instead.
    terms = [m.group("term") for m in _PLAN_TOKEN.finditer(cleaned) if m.group("term") is not None]
    if any(len(t) < 3 for t in terms):
        return _like_plan(cleaned)
    return _Plan("messages_fts_trigram", cleaned)


def _filters(
    source_filter: Sequence[str] | None,
    exclude_sources: Sequence[str] | None,
    role_filter: Sequence[str] | None,
    exclude_session_ids: Sequence[str] | None = None,
) -> tuple[str, list[Any]]:
    sql = ""
    params: list[Any] = []
    if source_filter:
        sql += f" AND s.source IN ({','.join('?' * len(source_filter))})"
        params.extend(source_filter)
    if exclude_sources:
        sql += f" AND s.source NOT IN ({','.join('?' * len(exclude_sources))})"
        params.extend(exclude_sources)
    if role_filter:
        sql += f" AND m.role IN ({','.join('?' * len(role_filter))})"
        params.extend(role_filter)
    if exclude_session_ids:
        sql += f" AND m.session_id NOT IN ({','.join('?' * len(exclude_session_ids))})"
        params.extend(exclude_session_ids)
    return sql, params


def _short(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= CONTEXT_CHARS else text[:CONTEXT_CHARS] + "..."


def _neighbour(conn: sqlite3.Connection, session_id: str, message_id: int, before: bool) -> dict[str, Any] | None:
    op, order = ("<", "DESC") if before else (">", "ASC")
    row = conn.execute(
        f"SELECT id, role, content FROM messages WHERE session_id = ? AND id {op} ? ORDER BY id {order} LIMIT 1",
        (session_id, message_id),
    ).fetchone()
    if row is None:
        return None
    return {"id": row["id"], "role": row["role"], "content": _short(row["content"])}


def _like_snippet(content: str, term: str, width: int = 40) -> str:
    at = content.find(term)
    if at < 0:
        return content[: width * 2]
    start, end = max(0, at - width), min(len(content), at + len(term) + width)
    return (
        ("..." if start else "")
        + content[start:at] + ">>>" + term + "<<<" + content[at + len(term) : end]
        + ("..." if end < len(content) else "")
    )


def search_messages(
    conn: sqlite3.Connection,
    query: str,
    *,
    source_filter: Sequence[str] | None = None,
    exclude_sources: Sequence[str] | None = None,
    role_filter: Sequence[str] | None = None,
    limit: int = 20,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Full-text search with FTS5 syntax; user text is sanitized first."""
    plan = _fts_plan(query)
    if plan is None:
        return []
    where, params = _filters(source_filter, exclude_sources, role_filter)
    cols = "m.id, m.session_id, m.role, m.timestamp, s.source, s.model, s.started_at AS session_started"
    if plan.table is None:
        rows = conn.execute(
            f"""
            SELECT {cols}, COALESCE(m.content, m.tool_calls, m.tool_name, '') AS snippet
            FROM messages m JOIN sessions s ON s.id = m.session_id
            WHERE ({plan.like_sql}) {where}
            ORDER BY m.id DESC LIMIT ? OFFSET ?
            """,
            (*plan.like_params, *params, limit, offset),
        ).fetchall()
    else:
        table = plan.table
        rows = conn.execute(
            f"""
            SELECT {cols}, snippet({table}, -1, '>>>', '<<<', '...', 40) AS snippet
            FROM {table} f
            JOIN messages m ON m.id = f.rowid
            JOIN sessions s ON s.id = m.session_id
            WHERE {table} MATCH ? {where}
            ORDER BY f.rank, m.id DESC
            LIMIT ? OFFSET ?
            """,
            (plan.fts_query, *params, limit, offset),
        ).fetchall()
    results = []
    for row in rows:
        d = _row_dict(row)
        if plan.table is None:
            d["snippet"] = _like_snippet(d["snippet"] or "", plan.first_term)
        d["context"] = [
            c
            for c in (
                _neighbour(conn, d["session_id"], d["id"], before=True),
                _neighbour(conn, d["session_id"], d["id"], before=False),
            )
            if c is not None
        ]
        results.append(d)
    return results


def _window(conn: sqlite3.Connection, session_id: str, anchor_id: int, window: int) -> dict[str, Any]:
    before = conn.execute(
        "SELECT id, role, content, tool_name, timestamp FROM messages WHERE session_id = ? AND id < ? "
        "ORDER BY id DESC LIMIT ?",
        (session_id, anchor_id, window),
    ).fetchall()
    after = conn.execute(
        "SELECT id, role, content, tool_name, timestamp FROM messages WHERE session_id = ? AND id >= ? "
        "ORDER BY id ASC LIMIT ?",
        (session_id, anchor_id, window + 1),
    ).fetchall()
    messages = [_row_dict(r) for r in reversed(before)] + [_row_dict(r) for r in after]
    for m in messages:
        m["anchor"] = m["id"] == anchor_id
    return {
        "session_id": session_id,
        "around_message_id": anchor_id,
        "messages": messages,
        "messages_before": len(before),
        "messages_after": max(0, len(after) - 1),
    }


def messages_around(conn: sqlite3.Connection, session_id: str, around_message_id: int,
                    window: int = 10) -> dict[str, Any]:
    """Scroll: ±window messages centred on one message of a session."""
    return _window(conn, session_id, around_message_id, max(0, min(window, 100)))


def _bookends(conn: sqlite3.Connection, session_id: str, n: int = 3) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    cols = "id, role, content, timestamp"
    start = conn.execute(
        f"SELECT {cols} FROM messages WHERE session_id = ? AND role IN ('user', 'assistant') "
        "AND content IS NOT NULL AND content != '' ORDER BY id LIMIT ?",
        (session_id, n),
    ).fetchall()
    end = conn.execute(
        f"SELECT {cols} FROM messages WHERE session_id = ? AND role IN ('user', 'assistant') "
        "AND content IS NOT NULL AND content != '' ORDER BY id DESC LIMIT ?",
        (session_id, n),
    ).fetchall()
    return [_row_dict(r) for r in start], [_row_dict(r) for r in reversed(end)]


def _lineage_root(conn: sqlite3.Connection, session_id: str, cache: dict[str, str]) -> str:
    if session_id not in cache:
        chain = lineage_ancestors(conn, session_id)
        cache[session_id] = str(chain[-1]["id"]) if chain else session_id
    return cache[session_id]


def search_sessions(
    conn: sqlite3.Connection,
    query: str,
    *,
    limit: int = 3,
    role_filter: Sequence[str] | None = ("user", "assistant"),
    source_filter: Sequence[str] | None = None,
    exclude_session_ids: Sequence[str] | None = None,
    sort: str | None = None,
    window: int = 5,
) -> list[dict[str, Any]]:
    """Discovery: the top sessions for a query, one per lineage, each with its
    opening and closing messages and a window around the best hit."""
    plan = _fts_plan(query)
    if plan is None:
        return []
    where, params = _filters(source_filter, None, role_filter, exclude_session_ids)
    order = {"newest": "started_at DESC, rank, id DESC", "oldest": "started_at ASC, rank, id DESC"}.get(
        sort or "", "rank, id DESC"
    )
    if plan.table is None:
        source_sql, match_params = f"messages m JOIN sessions s ON s.id = m.session_id WHERE ({plan.like_sql})", list(
            plan.like_params
        )
        rank_sql = "-m.id"
    else:
        table = plan.table
        source_sql = (
            f"{table} f JOIN messages m ON m.id = f.rowid JOIN sessions s ON s.id = m.session_id "
            f"WHERE {table} MATCH ?"
        )
        match_params = [plan.fts_query]
        rank_sql = "f.rank"
    # Filters apply before ranking, and each session keeps only its best hit,
    # so noisy sessions cannot crowd out the one that matters.
    sql = f"""
        SELECT id, session_id, title, source, started_at FROM (
            SELECT m.id, m.session_id, s.title, s.source, s.started_at, {rank_sql} AS rank,
                   ROW_NUMBER() OVER (PARTITION BY m.session_id ORDER BY {rank_sql}, m.id DESC) AS rn
            FROM {source_sql} {where}
        ) WHERE rn = 1
        ORDER BY {order}
        LIMIT ? OFFSET ?
    """
    by_rank = plan.table is not None and order == "rank, id DESC"
    top_hits = _FIRST_TOP_HITS
    roots: dict[str, str] = {}
    seen: set[str] = set()
    results: list[dict[str, Any]] = []
    page = max(limit * 4, 20)
    offset = 0
    while len(results) < limit:
        if by_rank:
            rows, top_hits = _page_by_rank(conn, plan, where, params, page, offset, top_hits)
        else:
            rows = conn.execute(sql, (*match_params, *params, page, offset)).fetchall()
        for row in rows:
            root = _lineage_root(conn, row["session_id"], roots)
            if root in seen:
                continue
            seen.add(root)
            results.append(_discovery_result(conn, plan, row, window))
            if len(results) >= limit:
                break
        if len(rows) < page:
            break
        offset += page
    return results


_FIRST_TOP_HITS = 256


def _page_by_rank(
    conn: sqlite3.Connection, plan: _Plan, where: str, params: list[Any], page: int, offset: int, top_hits: int
) -> tuple[list[sqlite3.Row], int]:
    """The page search_sessions' full query gives in relevance order, joining
    only the best-ranked hits; returns it and the number of hits it took.

    The sessions found among the first K hits (rank, id DESC order, filters
    applied) are exactly the first sessions of the full list: each one's best
    hit is among those K, and every session left out ranks after all of them.
    So a full page from the first K hits is the page; otherwise K grows until it
    covers every hit. A word in one message of ten joins a few hundred rows
    instead of ten thousand.
    """
    table = plan.table
    assert table is not None
    sql = f"""
        SELECT id, session_id, title, source, started_at FROM (
            SELECT m.id, m.session_id, s.title, s.source, s.started_at, f.rank AS rank,
                   ROW_NUMBER() OVER (PARTITION BY m.session_id ORDER BY f.rank, m.id DESC) AS rn
            FROM (SELECT rowid, rank FROM {table} WHERE {table} MATCH ? ORDER BY rank, rowid DESC LIMIT ?) f
            JOIN messages m ON m.id = f.rowid
            JOIN sessions s ON s.id = m.session_id
            WHERE 1 = 1 {where}
        ) WHERE rn = 1
        ORDER BY rank, id DESC
        LIMIT ? OFFSET ?
    """
    hits: int | None = None
    while True:
        rows: list[sqlite3.Row] = conn.execute(sql, (plan.fts_query, top_hits, *params, page, offset)).fetchall()
        if len(rows) == page:
            return rows, top_hits
        if hits is None:
            hits = int(conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?",
                                    (plan.fts_query,)).fetchone()[0])
        if top_hits >= hits:
            return rows, top_hits
        top_hits *= 4


def _discovery_result(conn: sqlite3.Connection, plan: _Plan, row: sqlite3.Row, window: int) -> dict[str, Any]:
    if plan.table is None:
        content = conn.execute(
            "SELECT COALESCE(content, tool_calls, tool_name, '') FROM messages WHERE id = ?", (row["id"],)
        ).fetchone()[0]
        snippet = _like_snippet(content, plan.first_term)
    else:
        snippet = conn.execute(
            f"SELECT snippet({plan.table}, -1, '>>>', '<<<', '...', 40) FROM {plan.table} "
            f"WHERE {plan.table} MATCH ? AND rowid = ?",
            (plan.fts_query, row["id"]),
        ).fetchone()[0]
    start, end = _bookends(conn, row["session_id"])
    win = _window(conn, row["session_id"], row["id"], window)
    return {
        "session_id": row["session_id"],
        "title": row["title"],
        "when": row["started_at"],
        "source": row["source"],
        "snippet": snippet,
        "bookend_start": start,
        "messages": win["messages"],
        "bookend_end": end,
        "match_message_id": row["id"],
        "messages_before": win["messages_before"],
        "messages_after": win["messages_after"],
    }

