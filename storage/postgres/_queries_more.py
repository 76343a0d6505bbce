"""What ``_queries`` needs beside its own functions: what a prune deletes, and the few reads of
other families' tables it composes (a chat's sessions, superseded answers, a session's files).

They are written here rather than imported from those families' PostgreSQL modules so that
``queries`` stands whole on its own; the rules are the SQLite backend's (``_prune``,
``_ownership``, ``_history``, ``_attachments``), in PostgreSQL's dialect.
"""

from __future__ import annotations

import time
from typing import Any

from .._model import ChatOwner, PrunePlan, PruneSkip
from ._conn import PgConnection, Row

#: text compared and sorted as state.db does (SQLite's BINARY: by code point), whatever the
#: database's locale
C = 'COLLATE "C"'

#: the order a session was stored in (``migrations/0006``): SQLite's rowid order, for ties
#: of ``started_at``
SEQ = "(SELECT o.seq FROM gateway_session_order o WHERE o.session_id = {alias}.id)"

_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = "abcdefghijklmnopqrstuvwxyz"


def escape_like(text: str) -> str:
    """``text`` matched literally by ``LIKE %s ESCAPE '\\'``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def ascii_lower(text: str) -> str:
    return text.translate(str.maketrans(_UPPER, _LOWER))


def ascii_lower_sql(expr: str) -> str:
    """``expr`` with A-Z folded: SQLite's LIKE ignores the case of ASCII letters only, where
    PostgreSQL's ILIKE folds every letter its locale knows."""
    return f"translate({expr}, '{_UPPER}', '{_LOWER}')"


def row_dict(row: Row) -> dict[str, Any]:
    return {key: row[key] for key in row.keys()}


# ---------------------------------------------------------------- other families' tables

# A chat's sessions (``_ownership``): every key it was bound to; on the terminal, the login's.
OWNED_SQL = """
    SELECT id FROM (
        SELECT s.id FROM gateway_session_bindings b JOIN sessions s ON s.id = b.session_id
        WHERE b.session_key = %s
        UNION
        SELECT s.id FROM gateway_session_bindings b JOIN sessions s ON s.id = b.session_id
        WHERE %s = 'cli' AND b.platform = 'cli' AND b.user_id = %s
        UNION
        SELECT id FROM sessions WHERE %s = 'cli' AND source = 'cli' AND user_id = %s
    ) AS owned
"""


def owned_params(chat: ChatOwner) -> list[Any]:
    return [chat.session_key, chat.platform, chat.user_id, chat.platform, chat.user_id]


def superseded_ids(conn: PgConnection, session_id: str) -> set[int]:
    """Messages a /retry replaced (``_history``)."""
    rows = conn.execute("SELECT message_id FROM gateway_superseded WHERE session_id = %s", (session_id,))
    return {int(r[0]) for r in rows}


def attachments_of(conn: PgConnection, session_id: str) -> list[dict[str, Any]]:
    """The files of a session's messages, for an export, in the order they were stored."""
    rows = conn.execute(
        "SELECT message_id, kind, mime, name, size, sha256, description, created_at FROM gateway_attachments "
        "WHERE session_id = %s ORDER BY id",
        (session_id,),
    ).fetchall()
    return [{"message_id": int(r[0]), "kind": str(r[1]), "mime": r[2], "name": r[3], "size": int(r[4]),
             "sha256": str(r[5]), "description": r[6], "created_at": float(r[7])} for r in rows]


# ---------------------------------------------------------------- prune

# ``_prune``'s rule: a candidate is old enough and ended; ``protected`` is every ancestor of a
# session that is not a candidate, with that kept session (``via``). UNION ends the recursion on
# a cycle of parents.
_PLAN_SQL = f"""
WITH RECURSIVE
candidate(id) AS (
    SELECT id FROM sessions WHERE ended_at IS NOT NULL AND started_at < %(cutoff)s
    AND (%(source)s::text IS NULL OR source = %(source)s::text)
),
protected(id, via) AS (
    SELECT parent_session_id, id FROM sessions
    WHERE parent_session_id IS NOT NULL AND id NOT IN (SELECT id FROM candidate)
    UNION
    SELECT s.parent_session_id, p.via FROM sessions s JOIN protected p ON s.id = p.id
    WHERE s.parent_session_id IS NOT NULL
)
SELECT s.id, s.title, (SELECT MIN(p.via {C}) FROM protected p WHERE p.id = s.id) AS via
FROM sessions s JOIN candidate c ON c.id = s.id
ORDER BY s.started_at, s.id {C}
"""


def prune_plan(conn: PgConnection, older_than_days: float, source: str | None = None,
               *, now: float | None = None) -> PrunePlan:
    cutoff = (time.time() if now is None else now) - older_than_days * 86400.0
    delete: list[str] = []
    skipped: list[PruneSkip] = []
    for row in conn.execute(_PLAN_SQL, {"cutoff": cutoff, "source": source or None}):
        if row[2] is None:
            delete.append(str(row[0]))
        else:
            skipped.append(PruneSkip(str(row[0]), None if row[1] is None else str(row[1]), str(row[2])))
    return PrunePlan(tuple(delete), tuple(skipped))


def prunable_session_ids(conn: PgConnection, older_than_days: float, source: str | None = None,
                         *, now: float | None = None) -> list[str]:
    """Ended sessions that started more than N days ago and no kept session continues
    from (what a prune deletes), oldest first."""
    return list(prune_plan(conn, older_than_days, source, now=now).delete)
