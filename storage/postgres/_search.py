"""Full-text search on PostgreSQL: matching messages (``search_messages``), discovery of sessions
(``search_sessions``) and scrolling around a hit (``messages_around``), as state.db's search.

The word index is the ``search_words`` tsvector (GIN), the substring index pg_trgm (GIN) over
``hermes_search_text``; both are kept by PostgreSQL in the row's own transaction, so unlike
state.db nothing waits for an indexer. Hits rank by FTS5's bm25 (``_search_plan.rank_sql``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from .._model import ChatOwner
from ._conn import PgConnection
from ._discovery import best_sessions
from ._search_plan import (
    COUNT_RANKS_SQL,
    SCAN,
    TRIGRAM,
    TRIGRAM_ROWS_SQL,
    WORDS,
    Node,
    Op,
    Plan,
    Rank,
    Term,
    idf,
    like_sql,
    plan,
    rank_sql,
    tsquery,
)
from ._search_text import (
    corpus_figures,
    filters,
    hits_of,
    like_snippet,
    substring_snippet,
    word_snippet,
)

CONTEXT_CHARS = 200
T = TypeVar("T")


def _row_dict(row: Any) -> dict[str, Any]:
    return {key: row[key] for key in row.keys()}


def _short(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= CONTEXT_CHARS else text[:CONTEXT_CHARS] + "..."


def _neighbour(conn: PgConnection, session_id: str, message_id: int, before: bool) -> Callable[[], dict[str, Any] | None]:
    """Queued (in a pipeline, several go to the server in one round trip); call the result after."""
    op, order = ("<", "DESC") if before else (">", "ASC")
    cur = conn.execute(
        f"SELECT id, role, content FROM messages WHERE session_id = %s AND id {op} %s ORDER BY id {order} LIMIT 1",
        (session_id, message_id),
    )

    def done() -> dict[str, Any] | None:
        row = cur.fetchone()
        return None if row is None else {"id": row["id"], "role": row["role"], "content": _short(row["content"])}

    return done


def _searched(conn: PgConnection, query: str, run: Callable[[Plan], list[T]]) -> list[T]:
    """``run``'s results under the query's plan, which asks whether a term is a whole word anywhere.

    Asking costs a scan of the table when it is not: the planner, unable to tell an absent word
    from a common one, reads every row for the first hit. So the word index is tried first, and
    only when it finds nothing is the question asked, of an index scan (cheap for an absent word),
    and the search run again if the answer is no. A hit proves each term that must match a whole
    word (so not behind OR: ``a OR b`` found proves neither; such a query asks first)."""
    asked: list[Term] = []

    def assume(term: Term) -> bool:
        asked.append(term)
        return True

    p = plan(query, assume)
    if p is None:
        return []
    if asked and _has_or(p.tree):
        p = plan(query, partial(_has_word_hits, conn, bitmap=False))
        assert p is not None
    found = run(p)
    if found or not asked or _has_or(p.tree):
        return found
    again = plan(query, partial(_has_word_hits, conn, bitmap=True))
    return found if again is None or again.kind == p.kind else run(again)


def _has_word_hits(conn: PgConnection, term: Term, *, bitmap: bool) -> bool:
    sql = "SELECT 1 FROM messages m WHERE m.search_words @@ to_tsquery('simple', %s)"
    if bitmap:  # the index's whole list first: nothing to read for an absent word, much for a common one
        sql = f"WITH h AS MATERIALIZED ({sql}) SELECT 1 FROM h LIMIT 1"
    else:
        sql += " LIMIT 1"
    return conn.execute(sql, (tsquery(term),)).fetchone() is not None


def _has_or(node: Node) -> bool:
    return isinstance(node, Op) and (node.op == "OR" or _has_or(node.left) or _has_or(node.right))


def _match(p: Plan) -> tuple[str, list[Any]]:
    """The WHERE condition of the plan's hits, and the rank of each (lower first)."""
    if p.kind == WORDS:
        return "m.search_words @@ to_tsquery('simple', %s)", [tsquery(p.tree)]
    sql, params = like_sql(p.tree)
    if p.kind == TRIGRAM:  # the substring index holds no tool results (migration 0003)
        return f"{TRIGRAM_ROWS_SQL} AND {sql}", params
    return sql, params


def _rank(conn: PgConnection, p: Plan) -> Rank:
    if p.kind == SCAN:
        return Rank("", [], "(-m.id)", [])
    rows, avgdl = corpus_figures(conn, p.kind)
    # One term's IDF scales every score alike; counting its hits would change no order.
    counted: dict[Term, int] = {}
    for t in p.terms if len(p.terms) > 1 else ():
        if t not in counted:
            counted[t] = hits_of(conn, p.kind, t)
    weights = [idf(rows, counted[t]) for t in p.terms] if counted else [1.0]
    return rank_sql(p.kind, p.terms, weights, avgdl, _count_ranks(conn))


_COUNT_RANKS: list[str] = []


def _count_ranks(conn: PgConnection) -> str:
    if not _COUNT_RANKS:
        row = conn.execute(COUNT_RANKS_SQL).fetchone()
        assert row is not None
        _COUNT_RANKS.append(str(row[0]))
    return _COUNT_RANKS[0]


def _snippet(p: Plan, columns: Sequence[str | None]) -> str | None:
    if p.kind == WORDS:
        return word_snippet(columns, p.terms)
    if p.kind == TRIGRAM:
        return substring_snippet(columns, p.terms)
    content, tool_name, tool_calls = columns
    return like_snippet(content or tool_calls or tool_name or "", p.first_term)


def search_messages(
    conn: PgConnection,
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
    return _searched(conn, query, partial(_messages, conn, source_filter=source_filter,
                                          exclude_sources=exclude_sources, role_filter=role_filter, limit=limit,
                                          offset=offset, owner=owner))


def _messages(conn: PgConnection, p: Plan, *, source_filter: Sequence[str] | None,
              exclude_sources: Sequence[str] | None, role_filter: Sequence[str] | None, limit: int, offset: int,
              owner: ChatOwner | None) -> list[dict[str, Any]]:
    match, match_params = _match(p)
    rank = _rank(conn, p)
    where, params = filters(source_filter, exclude_sources, role_filter, owner=owner)
    rows = conn.execute(
        f"""
        SELECT m.id, m.session_id, m.role, m.timestamp, s.source, s.model, s.started_at AS session_started,
               m.content, m.tool_name, m.tool_calls
        FROM (SELECT m.id, {rank.expr} AS rank FROM messages m{rank.lateral} WHERE {match} {where}) h
        JOIN messages m ON m.id = h.id JOIN sessions s ON s.id = m.session_id
        ORDER BY h.rank, m.id DESC LIMIT %s OFFSET %s
        """,
        (*rank.expr_params, *rank.lateral_params, *match_params, *params, limit, offset),
        prepare=False,  # planned for these values: a term's frequency decides the plan
    ).fetchall()
    results = []
    pending = []
    with conn.pipeline():  # the neighbours of every hit in one round trip
        for row in rows:
            d = {k: row[k] for k in ("id", "session_id", "role", "timestamp", "source", "model", "session_started")}
            d["snippet"] = _snippet(p, (row["content"], row["tool_name"], row["tool_calls"]))
            pending.append((d, _neighbour(conn, d["session_id"], d["id"], True),
                            _neighbour(conn, d["session_id"], d["id"], False)))
    for d, before, after in pending:
        d["context"] = [c for c in (before(), after()) if c is not None]
        results.append(d)
    return results


def _window(conn: PgConnection, session_id: str, anchor_id: int, window: int) -> Callable[[], dict[str, Any]]:
    before = conn.execute(
        "SELECT id, role, content, tool_name, timestamp FROM messages WHERE session_id = %s AND id < %s "
        "ORDER BY id DESC LIMIT %s",
        (session_id, anchor_id, window),
    )
    after = conn.execute(
        "SELECT id, role, content, tool_name, timestamp FROM messages WHERE session_id = %s AND id >= %s "
        "ORDER BY id ASC LIMIT %s",
        (session_id, anchor_id, window + 1),
    )

    def done() -> dict[str, Any]:
        before_rows, after_rows = before.fetchall(), after.fetchall()
        messages = [_row_dict(r) for r in reversed(before_rows)] + [_row_dict(r) for r in after_rows]
        for m in messages:
            m["anchor"] = m["id"] == anchor_id
        return {
            "session_id": session_id,
            "around_message_id": anchor_id,
            "messages": messages,
            "messages_before": len(before_rows),
            "messages_after": max(0, len(after_rows) - 1),
        }

    return done


def messages_around(conn: PgConnection, session_id: str, around_message_id: int,
                    window: int = 10) -> dict[str, Any]:
    """Scroll: ±window messages centred on one message of a session."""
    return _window(conn, session_id, around_message_id, max(0, min(window, 100)))()


def _bookends(conn: PgConnection, session_id: str, n: int = 3) -> Callable[[], tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    cols = "id, role, content, timestamp"
    start = conn.execute(
        f"SELECT {cols} FROM messages WHERE session_id = %s AND role IN ('user', 'assistant') "
        "AND content IS NOT NULL AND content != '' ORDER BY id LIMIT %s",
        (session_id, n),
    )
    end = conn.execute(
        f"SELECT {cols} FROM messages WHERE session_id = %s AND role IN ('user', 'assistant') "
        "AND content IS NOT NULL AND content != '' ORDER BY id DESC LIMIT %s",
        (session_id, n),
    )
    return lambda: ([_row_dict(r) for r in start.fetchall()], [_row_dict(r) for r in reversed(end.fetchall())])


def search_sessions(
    conn: PgConnection,
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
    return _searched(conn, query, partial(_sessions, conn, limit=limit, role_filter=role_filter,
                                          source_filter=source_filter, exclude_session_ids=exclude_session_ids,
                                          sort=sort, window=window, owner=owner))


def _sessions(conn: PgConnection, p: Plan, *, limit: int, role_filter: Sequence[str] | None,
              source_filter: Sequence[str] | None, exclude_session_ids: Sequence[str] | None, sort: str | None,
              window: int, owner: ChatOwner | None) -> list[dict[str, Any]]:
    match, match_params = _match(p)
    rank = _rank(conn, p)
    where, params = filters(source_filter, None, role_filter, exclude_session_ids, owner, superseded=False)
    # Filters apply before ranking, and each session keeps only its best hit,
    # so noisy sessions cannot crowd out the one that matters.
    hits = f"SELECT m.id, m.session_id, {rank.expr} AS rank FROM messages m{rank.lateral} WHERE {match} {where}"
    head = (*rank.expr_params, *rank.lateral_params, *match_params, *params)
    chosen = best_sessions(conn, hits, head, sort, limit)
    with conn.pipeline():  # every result's rows in one round trip
        pending = [_discovery_result(conn, p, row, window) for row in chosen]
    return [done() for done in pending]


def _discovery_result(conn: PgConnection, p: Plan, row: Any, window: int) -> Callable[[], dict[str, Any]]:
    hit = conn.execute("SELECT content, tool_name, tool_calls FROM messages WHERE id = %s", (row["id"],))
    bookends = _bookends(conn, row["session_id"])
    around = _window(conn, row["session_id"], row["id"], window)

    def done() -> dict[str, Any]:
        text = hit.fetchone()
        start, end = bookends()
        win = around()
        return {
            "session_id": row["session_id"],
            "title": row["title"],
            "when": row["started_at"],
            "source": row["source"],
            "snippet": None if text is None else _snippet(p, (text[0], text[1], text[2])),
            "bookend_start": start,
            "messages": win["messages"],
            "bookend_end": end,
            "match_message_id": row["id"],
            "messages_before": win["messages_before"],
            "messages_after": win["messages_after"],
        }

    return done
