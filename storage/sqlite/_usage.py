"""Token usage over time, from the reference's token columns of ``sessions`` (``hermes-gateway insights``).

The columns are per session, not per call: a session's tokens count on the
local day it started.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .._records import UsageRow as UsageRow
from .._records import UsageTotals as UsageTotals
from .._records import UserUsage as UserUsage


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


_SUMS = ("COUNT(*), COALESCE(SUM(api_call_count), 0), COALESCE(SUM(input_tokens), 0), "
         "COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cache_read_tokens), 0), SUM(estimated_cost_usd)")


def _totals(row: tuple[Any, ...]) -> UsageTotals:
    sessions, calls, prompt, completion, cached, cost = row
    return UsageTotals(int(sessions), int(calls), int(prompt), int(completion), int(cached),
                       None if cost is None else float(cost))


def session_totals(conn: sqlite3.Connection, session_id: str) -> UsageTotals:
    """One session's usage (zeros for a session that does not exist)."""
    row = conn.execute(f"SELECT {_SUMS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return _totals(tuple(row))


def usage_by_user(conn: sqlite3.Connection, *, since: float | None = None) -> list[UserUsage]:
    """Usage per person: each session counts for the user of its chat (the one who started it, or
    the user its chat's key was bound for), sessions started at ``since`` or later (None: all);
    most tokens first."""
    where, params = ("WHERE s.started_at >= ?", (since,)) if since is not None else ("", ())
    rows = conn.execute(
        "SELECT source, who, " + _SUMS + " FROM ("
        "  SELECT s.*, COALESCE(s.user_id, (SELECT b.user_id FROM gateway_session_bindings b "
        "    WHERE b.session_id = s.id AND b.user_id IS NOT NULL ORDER BY b.first_bound_at LIMIT 1)) AS who "
        f"  FROM sessions s {where}) "
        "GROUP BY source, who ORDER BY SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)) DESC, source, who",
        params,
    ).fetchall()
    return [UserUsage(str(r[0]), None if r[1] is None else str(r[1]), _totals(tuple(r)[2:])) for r in rows]
