"""Scheduled jobs (``gateway_cron_jobs``) and their runs (``gateway_cron_runs``), on PostgreSQL.

The same functions as SQLite's ``storage.sqlite.cron``. Several nodes' schedulers wake for the
same due time here, where state.db had one writer: a due time is still claimed by a
compare-and-set on ``next_due``, now one ``UPDATE … RETURNING`` that writes the run's row in the
same statement. Under READ COMMITTED a second claimer of the row waits for the first one's
COMMIT, then finds ``next_due`` moved on and claims nothing, so a due run starts on exactly one
node. A run names the node that started it (``node``: migration 0008), so a node starting up
cuts off only the runs of nodes that are gone (``interrupted_runs``). Which changes are allowed,
and when, is the gateway's (``gateway.scheduler``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from psycopg import errors as pg_errors

from .._model import CronJobRow, CronRunRow
from ._conn import PgConnection, Row

_JOB_COLUMNS = (
    "id, name, prompt, schedule, kind, deliver, toolsets, catch_up, owner_platform, owner_chat_id, "
    "owner_thread_id, owner_user_id, owner_session_key, owner_chat_type, paused, next_due, run_requested, "
    "last_run_at, last_status, failures, created_at, updated_at"
)
_RUN_COLUMNS = "id, job_id, due_at, started_at, finished_at, status, attempt, missed, session_id, ledger_id, error"
#: a running row (alias ``r``, with a ``node`` column: migration 0008) whose node is gone: written
#: before nodes were named, by this very node before its restart, or by a node with no connection
#: to this database now (a node killed loses its connections at once; one cut off the network,
#: when the server's TCP keepalives give up)
_CUT_OFF = ("(r.node IS NULL OR r.node = current_setting('application_name') OR NOT EXISTS "
           "(SELECT 1 FROM pg_stat_activity a WHERE a.datname = current_database() AND a.application_name = r.node))")
#: the columns ``update`` may set
UPDATABLE = frozenset({"name", "prompt", "schedule", "kind", "deliver", "toolsets", "catch_up", "paused",
                       "next_due", "run_requested", "failures", "last_status"})


def _job(row: Row) -> CronJobRow:
    toolsets = None if row["toolsets"] is None else tuple(json.loads(row["toolsets"]))
    return CronJobRow(
        row["id"], row["name"], row["prompt"], row["schedule"], row["kind"], row["deliver"], toolsets,
        row["catch_up"], row["owner_platform"], row["owner_chat_id"], row["owner_thread_id"], row["owner_user_id"],
        row["owner_session_key"], row["owner_chat_type"], bool(row["paused"]), row["next_due"],
        bool(row["run_requested"]), row["last_run_at"], row["last_status"], int(row["failures"]),
        float(row["created_at"]), float(row["updated_at"]),
    )


def _run(row: Row) -> CronRunRow:
    return CronRunRow(*tuple(row))


def _encode(column: str, value: Any) -> Any:
    if column == "toolsets":
        return None if value is None else json.dumps(list(value))
    if isinstance(value, bool):
        return int(value)
    return value


def insert(conn: PgConnection, job: CronJobRow) -> bool:
    """A new job; False when its owner already has a job of that name (nothing written)."""
    values = [_encode(k, getattr(job, k)) for k in CronJobRow.__dataclass_fields__]
    # ON CONFLICT, not a caught error: a failed statement would abort the caller's whole transaction.
    cur = conn.execute(f"INSERT INTO gateway_cron_jobs ({_JOB_COLUMNS}) VALUES ({','.join(['%s'] * len(values))}) "
                       "ON CONFLICT DO NOTHING", values)
    return cur.rowcount == 1


def get(conn: PgConnection, job_id: str) -> CronJobRow | None:
    row = conn.execute(f"SELECT {_JOB_COLUMNS} FROM gateway_cron_jobs WHERE id = %s", (job_id,)).fetchone()
    return None if row is None else _job(row)


def all_jobs(conn: PgConnection) -> list[CronJobRow]:
    rows = conn.execute(f"SELECT {_JOB_COLUMNS} FROM gateway_cron_jobs ORDER BY created_at, id COLLATE \"C\"").fetchall()
    return [_job(r) for r in rows]


def count_owned(conn: PgConnection, session_key: str, platform: str, user_id: str | None) -> int:
    """The jobs of a chat, and of its user in any chat of the platform (whom a limit counts)."""
    row = conn.execute("SELECT COUNT(*) FROM gateway_cron_jobs WHERE owner_session_key = %s "
                       "OR (%s::text IS NOT NULL AND owner_platform = %s AND owner_user_id = %s)",
                       (session_key, user_id, platform, user_id)).fetchone()
    return 0 if row is None else int(row[0])


def update(conn: PgConnection, job_id: str, fields: Mapping[str, Any], *, now: float) -> bool:
    """Set ``fields`` (names from ``UPDATABLE``); False when no such job. Raises
    sqlite3.IntegrityError when a new name is taken by the same owner (as the SQLite backend
    does: the gateway catches that one error), and the caller's transaction goes on."""
    unknown = set(fields) - UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    sets = [f"{k} = %s" for k in fields] + ["updated_at = %s"]
    params = [_encode(k, v) for k, v in fields.items()] + [now, job_id]
    try:
        # A savepoint: the name clash undoes this statement only, as a failed statement does in SQLite.
        with conn.transaction():
            cur = conn.execute(f"UPDATE gateway_cron_jobs SET {', '.join(sets)} WHERE id = %s", params)
    except pg_errors.UniqueViolation:
        raise sqlite3.IntegrityError("a job of that name exists for this owner") from None
    return cur.rowcount == 1


def delete(conn: PgConnection, job_id: str) -> bool:
    cur = conn.execute("DELETE FROM gateway_cron_jobs WHERE id = %s", (job_id,))
    return cur.rowcount == 1


def claim_due(conn: PgConnection, job_id: str, *, due: float, next_due: float | None, missed: int,
              now: float) -> int | None:
    """Start the run of ``due`` and move the job to ``next_due``, if ``due`` is still its
    unclaimed due time and it is not paused; the run's id, or None (someone else had it: another
    wake-up, or another node)."""
    row = conn.execute(
        "WITH claimed AS (UPDATE gateway_cron_jobs SET next_due = %s, last_run_at = %s, updated_at = %s "
        "WHERE id = %s AND next_due = %s AND paused = 0 RETURNING id) "
        "INSERT INTO gateway_cron_runs (job_id, due_at, started_at, status, attempt, missed) "
        "SELECT id, %s, %s, 'running', 1, %s FROM claimed RETURNING id",
        (next_due, now, now, job_id, due, due, now, missed),
    ).fetchone()
    return None if row is None else int(row[0])


def move_due(conn: PgConnection, job_id: str, *, due: float, next_due: float | None, now: float) -> bool:
    """Skip ``due`` (``catch_up: skip``) if it is still the job's unclaimed due time."""
    cur = conn.execute("UPDATE gateway_cron_jobs SET next_due = %s, updated_at = %s "
                       "WHERE id = %s AND next_due = %s AND paused = 0", (next_due, now, job_id, due))
    return cur.rowcount == 1


def claim_requested(conn: PgConnection, job_id: str, *, now: float) -> int | None:
    """Start the run a "run now" asked for, once (on one node); the run's id or None."""
    row = conn.execute(
        "WITH claimed AS (UPDATE gateway_cron_jobs SET run_requested = 0, last_run_at = %s, updated_at = %s "
        "WHERE id = %s AND run_requested = 1 RETURNING id) "
        "INSERT INTO gateway_cron_runs (job_id, due_at, started_at, status, attempt, missed) "
        "SELECT id, NULL, %s, 'running', 1, 0 FROM claimed RETURNING id",
        (now, now, job_id, now),
    ).fetchone()
    return None if row is None else int(row[0])


def _insert_run(conn: PgConnection, job_id: str, due: float | None, now: float, *, attempt: int,
                missed: int) -> int:
    row = conn.execute(
        "INSERT INTO gateway_cron_runs (job_id, due_at, started_at, status, attempt, missed) "
        "VALUES (%s, %s, %s, 'running', %s, %s) RETURNING id",
        (job_id, due, now, attempt, missed),
    ).fetchone()
    assert row is not None
    return int(row[0])


def interrupted_runs(conn: PgConnection, *, now: float) -> list[tuple[CronRunRow, int | None]]:
    """At start-up: every run still 'running' was cut off by a crash. Each is marked
    'interrupted' (and its job's last status); a first attempt gets its retry's row here,
    in the same transaction, so a second crash does not retry it again. The interrupted
    run and its retry's id (None: no retry, or the job is gone).

    Several nodes: a run is cut off when the node that started it (``node``, its connections'
    application_name) has no live connection to the database any more, or is this node before its
    restart; a live node's runs are left to it. Nodes that share one application_name are one
    node to this rule (every running row is taken, as on state.db). Only at a node's start, as on
    state.db: later, this node's own rows are its live runs. Two nodes starting at once each take
    the rows the other has not locked (SKIP LOCKED): a run is interrupted once."""
    rows = [_run(r) for r in conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM gateway_cron_runs r WHERE status = 'running' AND {_CUT_OFF} "
        "ORDER BY id FOR UPDATE OF r SKIP LOCKED").fetchall()]
    out: list[tuple[CronRunRow, int | None]] = []
    for run in rows:
        conn.execute("UPDATE gateway_cron_runs SET status = 'interrupted', finished_at = %s, "
                     "error = 'cut off by a restart' WHERE id = %s", (now, run.id))
        exists = conn.execute("UPDATE gateway_cron_jobs SET last_status = 'interrupted', updated_at = %s "
                              "WHERE id = %s", (now, run.job_id)).rowcount == 1
        retry = None
        if exists and run.attempt == 1:
            retry = _insert_run(conn, run.job_id, run.due_at, now, attempt=2, missed=run.missed)
        out.append((run, retry))
    return out


def set_session(conn: PgConnection, run_id: int, session_id: str) -> None:
    conn.execute("UPDATE gateway_cron_runs SET session_id = %s WHERE id = %s", (session_id, run_id))


def finish(conn: PgConnection, run_id: int, *, status: str, now: float, ledger_id: int | None = None,
           error: str | None = None, pause_after: int | None = None) -> tuple[int, bool]:
    """End a run as 'ok' or 'failed' and note it on its job (a failure counts one more in a row,
    an ok resets the count); with ``pause_after``, the job pauses at that many failures in a row.
    The job's failures in a row and whether this paused it."""
    row = conn.execute("UPDATE gateway_cron_runs SET status = %s, finished_at = %s, ledger_id = %s, error = %s "
                       "WHERE id = %s RETURNING job_id", (status, now, ledger_id, error, run_id)).fetchone()
    if row is None:
        return 0, False
    job_id = row[0]
    if status == "ok":
        conn.execute("UPDATE gateway_cron_jobs SET failures = 0, last_status = 'ok', updated_at = %s WHERE id = %s",
                     (now, job_id))
        return 0, False
    # The count and the pause read in the statement that raises the count: two runs of one job
    # failing on two nodes at once each see their own step.
    got = conn.execute("UPDATE gateway_cron_jobs SET failures = failures + 1, last_status = %s, updated_at = %s "
                       "WHERE id = %s RETURNING failures, paused", (status, now, job_id)).fetchone()
    if got is None:
        return 0, False
    failures, paused = int(got[0]), bool(got[1])
    if pause_after is not None and failures >= pause_after and not paused:
        conn.execute("UPDATE gateway_cron_jobs SET paused = 1, updated_at = %s WHERE id = %s", (now, job_id))
        return failures, True
    return failures, False


def get_run(conn: PgConnection, run_id: int) -> CronRunRow | None:
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM gateway_cron_runs WHERE id = %s", (run_id,)).fetchone()
    return None if row is None else _run(row)


def runs_of(conn: PgConnection, job_id: str, *, limit: int = 20) -> list[CronRunRow]:
    """The job's latest runs, newest first."""
    rows = conn.execute(f"SELECT {_RUN_COLUMNS} FROM gateway_cron_runs WHERE job_id = %s ORDER BY id DESC "
                        "LIMIT %s", (job_id, None if int(limit) < 0 else int(limit))).fetchall()
    return [_run(r) for r in rows]


def remember_owner(conn: PgConnection, session_key: str, session_id: str, *, platform: str,
                   user_id: str | None, now: float) -> None:
    """The owner's chat may see and /resume a run's session (its binding history), without the
    chat's own conversation moving there."""
    conn.execute("INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, "
                 "first_bound_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                 (session_key, session_id, platform, user_id, now))
