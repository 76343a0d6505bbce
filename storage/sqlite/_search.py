"""Full-text search: matching messages (``search_messages``), discovery of
sessions (``search_sessions``) and scrolling around a hit (``messages_around``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from .._model import ChatOwner
from ._queries import lineage_ancestors
from ._rows import row_dict as _row_dict
from ._search_plan import WORD_TABLE, Plan, filters, fts_plan, like_snippet, substring_plan
from ._search_tail import Source, read_snapshot, source

CONTEXT_CHARS = 200


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


def _plan(conn: sqlite3.Connection, query: str) -> Plan | None:
    """How to run ``query``: the word index, or the trigram index for a term that is part of a word."""
    plan = fts_plan(query)
    if plan is None:
        return None
    words: Source | None = None

    def has_word_hits(token: str) -> bool:
        nonlocal words
        if words is None:
            words = source(conn, WORD_TABLE)
        tables = [words.table] if words.tail is None else [words.table, words.tail]
        return any(
            conn.execute(f"SELECT 1 FROM {t} WHERE {t} MATCH ? LIMIT 1", (token,)).fetchone() is not None
            for t in tables
        )

    return substring_plan(plan, has_word_hits)


def search_messages(
    conn: sqlite3.Connection,
    query: str,
    *,
    source_filter: Sequence[str] | None = None,
    exclude_sources: Sequence[str] | None = None,
    role_filter: Sequence[str] | None = None,
    limit: int = 20,
    offset: int = 0,
    owner: ChatOwner | None = None,
) -> list[dict[str, Any]]:
    """Full-text search with FTS5 syntax; user text is sanitized first. A term of three
    characters or more that is no whole word anywhere matches as a substring (``netw``)."""
    with read_snapshot(conn):
        return _search_messages(conn, query, source_filter, exclude_sources, role_filter, limit, offset, owner)


def _snippet(conn: sqlite3.Connection, src: Source, fts_query: str, message_id: int) -> str | None:
    table = src.table_of(message_id)
    row = conn.execute(
        f"SELECT snippet({table}, -1, '>>>', '<<<', '...', 40) FROM {table} WHERE {table} MATCH ? AND rowid = ?",
        (fts_query, message_id),
    ).fetchone()
    return None if row is None else row[0]


def _search_messages(
    conn: sqlite3.Connection,
    query: str,
    source_filter: Sequence[str] | None,
    exclude_sources: Sequence[str] | None,
    role_filter: Sequence[str] | None,
    limit: int,
    offset: int,
    owner: ChatOwner | None,
) -> list[dict[str, Any]]:
    plan = _plan(conn, query)
    if plan is None:
        return []
    where, params = filters(source_filter, exclude_sources, role_filter, owner=owner)
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
        src = source(conn, plan.table)
        rows = conn.execute(
            f"""
            SELECT {cols}, NULL AS snippet
            FROM ({src.hits_sql()}) f
            JOIN messages m ON m.id = f.rowid
            JOIN sessions s ON s.id = m.session_id
            WHERE 1 = 1 {where}
            ORDER BY f.rank, m.id DESC
            LIMIT ? OFFSET ?
            """,
            (*src.params(plan.fts_query), *params, limit, offset),
        ).fetchall()
    results = []
    for row in rows:
        d = _row_dict(row)
        if plan.table is None:
            d["snippet"] = like_snippet(d["snippet"] or "", plan.first_term)
        else:
            d["snippet"] = _snippet(conn, src, plan.fts_query, d["id"])
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
    owner: ChatOwner | None = None,
) -> list[dict[str, Any]]:
    """Discovery: the top sessions for a query, one per lineage, each with its
    opening and closing messages and a window around the best hit; ``owner``
    keeps only the sessions that chat may resume."""
    with read_snapshot(conn):
        return _search_sessions(conn, query, limit, role_filter, source_filter, exclude_session_ids, sort,
                                window, owner)


def _search_sessions(
    conn: sqlite3.Connection,
    query: str,
    limit: int,
    role_filter: Sequence[str] | None,
    source_filter: Sequence[str] | None,
    exclude_session_ids: Sequence[str] | None,
    sort: str | None,
    window: int,
    owner: ChatOwner | None,
) -> list[dict[str, Any]]:
    plan = _plan(conn, query)
    if plan is None:
        return []
    where, params = filters(source_filter, None, role_filter, exclude_session_ids, owner)
    order = {"newest": "started_at DESC, rank, id DESC", "oldest": "started_at ASC, rank, id DESC"}.get(
        sort or "", "rank, id DESC"
    )
    src: Source | None = None
    if plan.table is None:
        source_sql, match_params = f"messages m JOIN sessions s ON s.id = m.session_id WHERE ({plan.like_sql})", list(
            plan.like_params
        )
        rank_sql = "-m.id"
    else:
        src = source(conn, plan.table)
        source_sql = (
            f"({src.hits_sql()}) f JOIN messages m ON m.id = f.rowid JOIN sessions s ON s.id = m.session_id "
            "WHERE 1 = 1"
        )
        match_params = list(src.params(plan.fts_query))
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
        if by_rank and src is not None:
            rows, top_hits = _page_by_rank(conn, plan, src, where, params, page, offset, top_hits)
        else:
            rows = conn.execute(sql, (*match_params, *params, page, offset)).fetchall()
        for row in rows:
            root = _lineage_root(conn, row["session_id"], roots)
            if root in seen:
                continue
            seen.add(root)
            results.append(_discovery_result(conn, plan, src, row, window))
            if len(results) >= limit:
                break
        if len(rows) < page:
            break
        offset += page
    return results


_FIRST_TOP_HITS = 256


def _page_by_rank(
    conn: sqlite3.Connection, plan: Plan, src: Source, where: str, params: list[Any], page: int, offset: int,
    top_hits: int,
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
    sql = f"""
        SELECT id, session_id, title, source, started_at FROM (
            SELECT m.id, m.session_id, s.title, s.source, s.started_at, f.rank AS rank,
                   ROW_NUMBER() OVER (PARTITION BY m.session_id ORDER BY f.rank, m.id DESC) AS rn
            FROM (SELECT rowid, rank FROM ({src.hits_sql()}) ORDER BY rank, rowid DESC LIMIT ?) f
            JOIN messages m ON m.id = f.rowid
            JOIN sessions s ON s.id = m.session_id
            WHERE 1 = 1 {where}
        ) WHERE rn = 1
        ORDER BY rank, id DESC
        LIMIT ? OFFSET ?
    """
    hits: int | None = None
    while True:
        match = src.params(plan.fts_query)
        rows: list[sqlite3.Row] = conn.execute(sql, (*match, top_hits, *params, page, offset)).fetchall()
        if len(rows) == page:
            return rows, top_hits
        if hits is None:
            hits = int(conn.execute(f"SELECT count(*) FROM ({src.hits_sql()})", match).fetchone()[0])
        if top_hits >= hits:
            return rows, top_hits
        top_hits *= 4


def _discovery_result(
    conn: sqlite3.Connection, plan: Plan, src: Source | None, row: sqlite3.Row, window: int
) -> dict[str, Any]:
    snippet: str | None
    if src is None:
        content = conn.execute(
            "SELECT COALESCE(content, tool_calls, tool_name, '') FROM messages WHERE id = ?", (row["id"],)
        ).fetchone()[0]
        snippet = like_snippet(content, plan.first_term)
    else:
        snippet = _snippet(conn, src, plan.fts_query, row["id"])
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
