"""Full-text search on PostgreSQL: matching messages (``search_messages``), discovery of sessions
(``search_sessions``) and scrolling around a hit (``messages_around``), as state.db's search.

The word index is the ``search_words`` tsvector (GIN), the substring index pg_trgm (GIN) over
``hermes_search_text``; both are kept by PostgreSQL in the row's own transaction, so unlike
state.db nothing waits for an indexer. Hits rank by FTS5's bm25 (``_search_plan.rank_sql``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._model import ChatOwner
from ._conn import PgConnection
from ._search_plan import (
    COUNT_RANKS_SQL,
    SCAN,
    TRIGRAM,
    TRIGRAM_ROWS_SQL,
    WORDS,
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
    SUPERSEDED_SQL,
    corpus_figures,
    filters,
    hits_of,
    like_snippet,
    substring_snippet,
    word_snippet,
)

CONTEXT_CHARS = 200
#: discovery reads this many top hits per session it needs before it ranks sessions one by one
_HITS_PER_SESSION = 4
#: sessions whose lineage roots are asked for in one query
_LINEAGE_BATCH = 20


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


def _plan(conn: PgConnection, query: str) -> Plan | None:
    def has_word_hits(term: Term) -> bool:
        sql = "SELECT 1 FROM messages m WHERE m.search_words @@ to_tsquery('simple', %s) LIMIT 1"
        return conn.execute(sql, (tsquery(term),)).fetchone() is not None

    return plan(query, has_word_hits)


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
    p = _plan(conn, query)
    if p is None:
        return []
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


def _lineage_roots(conn: PgConnection, session_ids: Sequence[str], cache: dict[str, str]) -> None:
    """The oldest ancestor of each session (as ``queries.lineage_ancestors`` walks it), into ``cache``:
    one result per lineage. One query for a page of hits."""
    todo = [sid for sid in dict.fromkeys(session_ids) if sid not in cache]
    if not todo:
        return
    rows = conn.execute(
        """
        WITH RECURSIVE lineage(start, id, parent_session_id, depth) AS (
            SELECT id, id, parent_session_id, 0 FROM sessions WHERE id = ANY(%s)
            UNION ALL
            SELECT l.start, s.id, s.parent_session_id, l.depth + 1
            FROM sessions s JOIN lineage l ON s.id = l.parent_session_id
            WHERE l.depth < 10000
        )
        SELECT DISTINCT ON (start) start, id FROM lineage ORDER BY start, depth DESC
        """,
        (todo,),
    ).fetchall()
    found = {str(r[0]): str(r[1]) for r in rows}
    for sid in todo:
        cache[sid] = found.get(sid, sid)


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
    p = _plan(conn, query)
    if p is None:
        return []
    match, match_params = _match(p)
    rank = _rank(conn, p)
    where, params = filters(source_filter, None, role_filter, exclude_session_ids, owner, superseded=False)
    # Filters apply before ranking, and each session keeps only its best hit,
    # so noisy sessions cannot crowd out the one that matters.
    hits = f"SELECT m.id, m.session_id, {rank.expr} AS rank FROM messages m{rank.lateral} WHERE {match} {where}"
    head = (*rank.expr_params, *rank.lateral_params, *match_params, *params)
    page = max(limit * 4, 20)
    if sort in ("newest", "oldest"):
        chosen = _best_per_session(conn, _unsuperseded(hits), head, sort, limit, page)
    else:
        chosen = _top_sessions(conn, hits, head, limit, page)
    with conn.pipeline():  # every result's rows in one round trip
        pending = [_discovery_result(conn, p, row, window) for row in chosen]
    return [done() for done in pending]


def _top_sessions(conn: PgConnection, hits: str, head: tuple[Any, ...], limit: int, page: int) -> list[Any]:
    """The best-ranked sessions, one per lineage. A session's best hit is its first in the order of
    all hits, so the top few hundred hits (a top-N sort, where ranking every session's best first
    sorted all hits twice) hold the first sessions; a page of them that holds too few continues as
    ``_best_per_session`` from the sessions already seen."""
    # ``hits`` holds superseded answers: only the few read back are looked up (not every hit)
    rows = conn.execute(
        f"""
        SELECT h.id, h.session_id, s.title, s.source, s.started_at, {SUPERSEDED_SQL.format(id='h.id')} AS kept FROM (
            SELECT * FROM ({hits}) h ORDER BY h.rank, h.id DESC LIMIT %s
        ) h JOIN sessions s ON s.id = h.session_id ORDER BY h.rank, h.id DESC
        """,
        (*head, page * _HITS_PER_SESSION),
        prepare=False,  # planned for these values: a term's frequency decides the plan
    ).fetchall()
    first: dict[str, Any] = {}  # each session's first hit: its best
    for row in rows:
        if row["kept"]:
            first.setdefault(row["session_id"], row)
    roots: dict[str, str] = {}
    seen: set[str] = set()
    chosen = _one_per_lineage(conn, list(first.values()), roots, seen, limit)
    if len(chosen) >= limit or len(rows) < page * _HITS_PER_SESSION:
        return chosen
    # these sessions are the first len(first) in the order of their best hits: go on after them
    return _best_per_session(conn, _unsuperseded(hits), head, None, limit, page, offset=len(first), roots=roots,
                             seen=seen, chosen=chosen)


def _unsuperseded(hits: str) -> str:
    return f"{hits} AND {SUPERSEDED_SQL.format(id='m.id')}"


def _one_per_lineage(conn: PgConnection, rows: Sequence[Any], roots: dict[str, str], seen: set[str],
                     limit: int, chosen: list[Any] | None = None) -> list[Any]:
    """``chosen`` and those of ``rows`` (sessions in order) whose lineage is not yet ``seen``, up to ``limit``."""
    chosen = [] if chosen is None else chosen
    for start in range(0, len(rows), _LINEAGE_BATCH):
        if len(chosen) >= limit:
            break
        batch = rows[start: start + _LINEAGE_BATCH]
        _lineage_roots(conn, [row["session_id"] for row in batch], roots)
        for row in batch:
            if len(chosen) >= limit:
                break
            root = roots[row["session_id"]]
            if root not in seen:
                seen.add(root)
                chosen.append(row)
    return chosen


def _best_per_session(conn: PgConnection, hits: str, head: tuple[Any, ...], sort: str | None, limit: int,
                      page: int, *, offset: int = 0, roots: dict[str, str] | None = None,
                      seen: set[str] | None = None, chosen: list[Any] | None = None) -> list[Any]:
    """Every session's best hit ranked (a window over all hits), a page of sessions at a time."""
    order = {"newest": "s.started_at DESC, b.rank, b.id DESC", "oldest": "s.started_at ASC, b.rank, b.id DESC"}.get(
        sort or "", "b.rank, b.id DESC"
    )
    best = f"""
        SELECT h.id, h.session_id, h.rank,
               ROW_NUMBER() OVER (PARTITION BY h.session_id ORDER BY h.rank, h.id DESC) AS rn
        FROM ({hits}) h
    """
    if sort in ("newest", "oldest"):
        sql = f"""
            SELECT b.id, b.session_id, s.title, s.source, s.started_at FROM ({best}) b
            JOIN sessions s ON s.id = b.session_id WHERE b.rn = 1 ORDER BY {order} LIMIT %s OFFSET %s
        """
    else:  # the page first, then its sessions
        sql = f"""
            SELECT b.id, b.session_id, s.title, s.source, s.started_at FROM (
                SELECT * FROM ({best}) a WHERE a.rn = 1 ORDER BY a.rank, a.id DESC LIMIT %s OFFSET %s
            ) b JOIN sessions s ON s.id = b.session_id ORDER BY {order}
        """
    roots = {} if roots is None else roots
    seen = set() if seen is None else seen
    chosen = [] if chosen is None else chosen
    while len(chosen) < limit:
        rows = conn.execute(sql, (*head, page, offset), prepare=False).fetchall()
        _one_per_lineage(conn, rows, roots, seen, limit, chosen)
        if len(rows) < page:
            break
        offset += page
    return chosen


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
