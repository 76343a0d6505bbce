"""Which sessions a discovery (``search.search_sessions``) returns: each session's best hit, the
sessions in the order of those hits, one per lineage (its oldest ancestor), past superseded answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._conn import PgConnection
from ._search_text import SUPERSEDED_SQL

#: discovery reads this many top hits per session it needs before it ranks sessions one by one
_HITS_PER_SESSION = 4
#: sessions whose lineage roots are asked for in one query
_LINEAGE_BATCH = 20


def best_sessions(conn: PgConnection, hits: str, head: tuple[Any, ...], sort: str | None, limit: int) -> list[Any]:
    """Rows (id, session_id, title, source, started_at, parent_session_id) of the chosen sessions'
    best hits. ``hits`` selects every matching message's id, session_id and rank (lower first)
    from ``messages m`` with ``head`` its parameters, superseded answers included."""
    page = max(limit * 4, 20)
    if sort in ("newest", "oldest"):
        return _best_per_session(conn, _unsuperseded(hits), head, sort, limit, page)
    return _top_sessions(conn, hits, head, limit, page)


def _top_sessions(conn: PgConnection, hits: str, head: tuple[Any, ...], limit: int, page: int) -> list[Any]:
    """The best-ranked sessions, one per lineage. A session's best hit is its first in the order of
    all hits, so the top few hundred hits (a top-N sort, where ranking every session's best first
    sorted all hits twice) hold the first sessions; a page of them that holds too few continues as
    ``_best_per_session`` from the sessions already seen."""
    # ``hits`` holds superseded answers: only the few read back are looked up (not every hit)
    rows = conn.execute(
        f"""
        SELECT h.id, h.session_id, s.title, s.source, s.started_at, s.parent_session_id,
               {SUPERSEDED_SQL.format(id='h.id')} AS kept FROM (
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
        for row in batch:
            if row["parent_session_id"] is None:  # its own root: no walk to ask for
                roots[row["session_id"]] = row["session_id"]
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
            SELECT b.id, b.session_id, s.title, s.source, s.started_at, s.parent_session_id FROM ({best}) b
            JOIN sessions s ON s.id = b.session_id WHERE b.rn = 1 ORDER BY {order} LIMIT %s OFFSET %s
        """
    else:  # the page first, then its sessions
        sql = f"""
            SELECT b.id, b.session_id, s.title, s.source, s.started_at, s.parent_session_id FROM (
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
