"""What a prune deletes: ended sessions older than N days, never a link of a kept lineage
(the same plan as ``storage.sqlite``'s ``_prune``; read its docstring for why).

Ids are compared and ordered bytewise (``COLLATE "C"``), as SQLite does, so ``via`` (the kept
session named for a skipped one) and the order are the same on both backends whatever the
database's collation.
"""

from __future__ import annotations

import time
from typing import Any

from .._model import PrunePlan, PruneSkip
from ._conn import PgConnection

# ``candidate``: old enough and ended. ``protected``: every ancestor of a session that is
# not a candidate, with that kept session (``via``). UNION ends the recursion on a cycle.
_PLAN_SQL = """
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
SELECT s.id, s.title, (SELECT MIN(p.via COLLATE "C") FROM protected p WHERE p.id = s.id) AS via
FROM sessions s JOIN candidate c ON c.id = s.id
ORDER BY s.started_at, s.id COLLATE "C"
"""


def prune_plan(conn: PgConnection, older_than_days: float, source: str | None = None,
               *, now: float | None = None) -> PrunePlan:
    cutoff = (time.time() if now is None else now) - older_than_days * 86400.0
    params: dict[str, Any] = {"cutoff": float(cutoff), "source": source or None}
    delete: list[str] = []
    skipped: list[PruneSkip] = []
    for row in conn.execute(_PLAN_SQL, params):
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
