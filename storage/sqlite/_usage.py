"""Token usage over time, from the reference's token columns of ``sessions`` (``hermes-gateway insights``).

The columns are per session, not per call: a session's tokens count on the
local day it started.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True)
class UsageRow:
    """What the sessions of one day, source and model used."""

    day: str  # YYYY-MM-DD, local time
    source: str
    model: str | None
    sessions: int
    api_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int


def usage_by_day(conn: sqlite3.Connection, *, since: float, source: str | None = None) -> list[UsageRow]:
    """Usage of the sessions started at ``since`` or later, per day, source and model (oldest day first)."""
    where = "started_at >= ?" + (" AND source = ?" if source is not None else "")
    params: tuple[object, ...] = (since, source) if source is not None else (since,)
    rows = conn.execute(
        "SELECT date(started_at, 'unixepoch', 'localtime') AS day, source, model, COUNT(*) AS sessions, "
        "COALESCE(SUM(api_call_count), 0), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), "
        "COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0), "
        "COALESCE(SUM(reasoning_tokens), 0) "
        f"FROM sessions WHERE {where} GROUP BY day, source, model ORDER BY day, source, model",
        params,
    ).fetchall()
    return [UsageRow(str(r[0]), str(r[1]), None if r[2] is None else str(r[2]), *(int(v) for v in tuple(r)[3:]))
            for r in rows]
