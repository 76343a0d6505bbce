"""Token usage over time, from the reference's token columns of ``sessions`` (``hermes-gateway
insights``, ``/usage``, the ``usage`` CLI): the SQLite backend's ``usage`` in PostgreSQL.

The columns are per session, not per call: a session's tokens count on the local day it started,
local to this process (as SQLite's ``'localtime'`` is), not to the database server.
"""

from __future__ import annotations

import time
from typing import Any

from .._records import UsageRow as UsageRow
from .._records import UsageTotals as UsageTotals
from .._records import UserUsage as UserUsage
from ._conn import PgConnection

_C = 'COLLATE "C"'  # text sorted by code point, as state.db's BINARY

#: seconds: every local day starts on a multiple of 15 minutes (every zone's offset is one), so
#: sums per quarter hour, added up per local day here, are the sums per local day
_QUARTER = 900

_TOKENS = ("COALESCE(SUM(api_call_count), 0)::bigint, COALESCE(SUM(input_tokens), 0)::bigint, "
           "COALESCE(SUM(output_tokens), 0)::bigint, COALESCE(SUM(cache_read_tokens), 0)::bigint")


def usage_by_day(conn: PgConnection, *, since: float, source: str | None = None) -> list[UsageRow]:
    """Usage of the sessions started at ``since`` or later, per day, source and model (oldest day first)."""
    where = "started_at >= %s" + (" AND source = %s" if source is not None else "")
    params: tuple[object, ...] = (since, source) if source is not None else (since,)
    rows = conn.execute(
        f"SELECT floor(started_at / {_QUARTER})::bigint AS quarter, source, model, COUNT(*), {_TOKENS}, "
        "COALESCE(SUM(cache_write_tokens), 0)::bigint, COALESCE(SUM(reasoning_tokens), 0)::bigint "
        f"FROM sessions WHERE {where} GROUP BY quarter, source, model",
        params,
    ).fetchall()
    days: dict[tuple[str, str, str | None], list[int]] = {}
    for r in rows:
        day = time.strftime("%Y-%m-%d", time.localtime(int(r[0]) * _QUARTER))
        key = (day, str(r[1]), None if r[2] is None else str(r[2]))
        sums = days.setdefault(key, [0] * 7)
        for i, value in enumerate(tuple(r)[3:]):
            sums[i] += int(value)
    # SQLite's ORDER BY day, source, model: a NULL model first, text by code point
    ordered = sorted(days, key=lambda k: (k[0], k[1], k[2] is not None, k[2] or ""))
    return [UsageRow(day, src, model, *days[(day, src, model)]) for day, src, model in ordered]


_SUMS = f"COUNT(*), {_TOKENS}, SUM(estimated_cost_usd)"


def _totals(row: tuple[Any, ...]) -> UsageTotals:
    sessions, calls, prompt, completion, cached, cost = row
    return UsageTotals(int(sessions), int(calls), int(prompt), int(completion), int(cached),
                       None if cost is None else float(cost))


def session_totals(conn: PgConnection, session_id: str) -> UsageTotals:
    """One session's usage (zeros for a session that does not exist)."""
    row = conn.execute(f"SELECT {_SUMS} FROM sessions WHERE id = %s", (session_id,)).fetchone()
    return _totals(tuple(row) if row is not None else (0, 0, 0, 0, 0, None))


def usage_by_user(conn: PgConnection, *, since: float | None = None) -> list[UserUsage]:
    """Usage per person: each session counts for the user of its chat (the one who started it, or
    the user its chat's key was bound for), sessions started at ``since`` or later (None: all);
    most tokens first."""
    where, params = ("WHERE s.started_at >= %s", (since,)) if since is not None else ("", ())
    # A chat's first binding; ties by key, the order state.db's index gives them in.
    rows = conn.execute(
        "SELECT source, who, " + _SUMS + " FROM ("
        "  SELECT s.*, COALESCE(s.user_id, (SELECT b.user_id FROM gateway_session_bindings b "
        "    WHERE b.session_id = s.id AND b.user_id IS NOT NULL "
        f"    ORDER BY b.first_bound_at, b.session_key {_C} LIMIT 1)) AS who "
        f"  FROM sessions s {where}) AS t "
        "GROUP BY source, who ORDER BY SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)) DESC, "
        f"source {_C}, who {_C} NULLS FIRST",
        params,
    ).fetchall()
    return [UserUsage(str(r[0]), None if r[1] is None else str(r[1]), _totals(tuple(r)[2:])) for r in rows]
