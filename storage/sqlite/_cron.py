"""Scheduled jobs (``gateway_cron_jobs``) and their runs (``gateway_cron_runs``).

A due time is claimed by a compare-and-set on ``next_due`` in the transaction that writes
the run's row: two wake-ups for one due time (a clock jump, a restart) start one run.
Which changes are allowed, and when, is the gateway's (``gateway.scheduler``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from .._model import CronJobRow, CronRunRow

_JOB_COLUMNS = (
    "id, name, prompt, schedule, kind, deliver, toolsets, catch_up, owner_platform, owner_chat_id, "
    "owner_thread_id, owner_user_id, owner_session_key, owner_chat_type, paused, next_due, run_requested, "
    "last_run_at, last_status, failures, created_at, updated_at"
)
_RUN_COLUMNS = "id, job_id, due_at, started_at, finished_at, status, attempt, missed, session_id, ledger_id, error"
#: the columns ``update`` may set
UPDATABLE = frozenset({"name", "prompt", "schedule", "kind", "deliver", "toolsets", "catch_up", "paused",
                       "next_due", "run_requested", "failures", "last_status"})


def _job(row: sqlite3.Row) -> CronJobRow:
    toolsets = None if row["toolsets"] is None else tuple(json.loads(row["toolsets"]))
    return CronJobRow(
        row["id"], row["name"], row["prompt"], row["schedule"], row["kind"], row["deliver"], toolsets,
        row["catch_up"], row["owner_platform"], row["owner_chat_id"], row["owner_thread_id"], row["owner_user_id"],
        row["owner_session_key"], row["owner_chat_type"], bool(row["paused"]), row["next_due"],
        bool(row["run_requested"]), row["last_run_at"], row["last_status"], int(row["failures"]),
        float(row["created_at"]), float(row["updated_at"]),
    )


def _run(row: sqlite3.Row) -> CronRunRow:
    return CronRunRow(*tuple(row))


def _encode(column: str, value: Any) -> Any:
    if column == "toolsets":
        return None if value is None else json.dumps(list(value))
    if isinstance(value, bool):
        return int(value)
    return value


def insert(conn: sqlite3.Connection, job: CronJobRow) -> bool:
    """A new job; False when its owner already has a job of that name (nothing written)."""
    values = [_encode(k, getattr(job, k)) for k in CronJobRow.__dataclass_fields__]
    try:
        conn.execute(f"INSERT INTO gateway_cron_jobs ({_JOB_COLUMNS}) VALUES ({','.join('?' * len(values))})",
                     values)
    except sqlite3.IntegrityError:
        return False
    return True


def get(conn: sqlite3.Connection, job_id: str) -> CronJobRow | None:
    row = conn.execute(f"SELECT {_JOB_COLUMNS} FROM gateway_cron_jobs WHERE id = ?", (job_id,)).fetchone()
    return None if row is None else _job(row)


def all_jobs(conn: sqlite3.Connection) -> list[CronJobRow]:
    rows = conn.execute(f"SELECT {_JOB_COLUMNS} FROM gateway_cron_jobs ORDER BY created_at, id").fetchall()
    return [_job(r) for r in rows]


def count_owned(conn: sqlite3.Connection, session_key: str, platform: str, user_id: str | None) -> int:
    """The jobs of a chat, and of its user in any chat of the platform (whom a limit counts)."""
    row = conn.execute("SELECT COUNT(*) FROM gateway_cron_jobs WHERE owner_session_key = ? "
                       "OR (? IS NOT NULL AND owner_platform = ? AND owner_user_id = ?)",
                       (session_key, user_id, platform, user_id)).fetchone()
    return int(row[0])


def update(conn: sqlite3.Connection, job_id: str, fields: Mapping[str, Any], *, now: float) -> bool:
    """Set ``fields`` (names from ``UPDATABLE``); False when no such job. Raises
    sqlite3.IntegrityError when a new name is taken by the same owner."""
    unknown = set(fields) - UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    sets = [f"{k} = ?" for k in fields] + ["updated_at = ?"]
    params = [_encode(k, v) for k, v in fields.items()] + [now, job_id]
    cur = conn.execute(f"UPDATE gateway_cron_jobs SET {', '.join(sets)} WHERE id = ?", params)
    return cur.rowcount == 1


def delete(conn: sqlite3.Connection, job_id: str) -> bool:
    cur = conn.execute("DELETE FROM gateway_cron_jobs WHERE id = ?", (job_id,))
    return cur.rowcount == 1


def claim_due(conn: sqlite3.Connection, job_id: str, *, due: float, next_due: float | None, missed: int,
              now: float) -> int | None:
    """Start the run of ``due`` and move the job to ``next_due``, if ``due`` is still its
    unclaimed due time and it is not paused; the run's id, or None (someone else had it)."""
    cur = conn.execute(
        "UPDATE gateway_cron_jobs SET next_due = ?, last_run_at = ?, updated_at = ? "
        "WHERE id = ? AND next_due = ? AND paused = 0",
        (next_due, now, now, job_id, due),
    )
    if cur.rowcount != 1:
        return None
    return _insert_run(conn, job_id, due, now, attempt=1, missed=missed)


def move_due(conn: sqlite3.Connection, job_id: str, *, due: float, next_due: float | None, now: float) -> bool:
    """Skip ``due`` (``catch_up: skip``) if it is still the job's unclaimed due time."""
    cur = conn.execute("UPDATE gateway_cron_jobs SET next_due = ?, updated_at = ? "
                       "WHERE id = ? AND next_due = ? AND paused = 0", (next_due, now, job_id, due))
    return cur.rowcount == 1


def claim_requested(conn: sqlite3.Connection, job_id: str, *, now: float) -> int | None:
    """Start the run a "run now" asked for, once; the run's id or None."""
    cur = conn.execute(
        "UPDATE gateway_cron_jobs SET run_requested = 0, last_run_at = ?, updated_at = ? "
        "WHERE id = ? AND run_requested = 1",
        (now, now, job_id),
    )
    if cur.rowcount != 1:
        return None
    return _insert_run(conn, job_id, None, now, attempt=1, missed=0)


def _insert_run(conn: sqlite3.Connection, job_id: str, due: float | None, now: float, *, attempt: int,
                missed: int) -> int:
    cur = conn.execute(
        "INSERT INTO gateway_cron_runs (job_id, due_at, started_at, status, attempt, missed) "
        "VALUES (?, ?, ?, 'running', ?, ?)",
        (job_id, due, now, attempt, missed),
    )
    return int(cur.lastrowid or 0)


def interrupted_runs(conn: sqlite3.Connection, *, now: float) -> list[tuple[CronRunRow, int | None]]:
    """At start-up: every run still 'running' was cut off by a crash. Each is marked
    'interrupted' (and its job's last status); a first attempt gets its retry's row here,
    in the same transaction, so a second crash does not retry it again. The interrupted
    run and its retry's id (None: no retry, or the job is gone)."""
    rows = [_run(r) for r in conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM gateway_cron_runs WHERE status = 'running' ORDER BY id").fetchall()]
    out: list[tuple[CronRunRow, int | None]] = []
    for run in rows:
        conn.execute("UPDATE gateway_cron_runs SET status = 'interrupted', finished_at = ?, "
                     "error = 'cut off by a restart' WHERE id = ?", (now, run.id))
        exists = conn.execute("UPDATE gateway_cron_jobs SET last_status = 'interrupted', updated_at = ? "
                              "WHERE id = ?", (now, run.job_id)).rowcount == 1
        retry = None
        if exists and run.attempt == 1:
            retry = _insert_run(conn, run.job_id, run.due_at, now, attempt=2, missed=run.missed)
        out.append((run, retry))
    return out


def set_session(conn: sqlite3.Connection, run_id: int, session_id: str) -> None:
    conn.execute("UPDATE gateway_cron_runs SET session_id = ? WHERE id = ?", (session_id, run_id))


def finish(conn: sqlite3.Connection, run_id: int, *, status: str, now: float, ledger_id: int | None = None,
           error: str | None = None, pause_after: int | None = None) -> tuple[int, bool]:
    """End a run as 'ok' or 'failed' and note it on its job (a failure counts one more in a row,
    an ok resets the count); with ``pause_after``, the job pauses at that many failures in a row.
    The job's failures in a row and whether this paused it."""
    conn.execute("UPDATE gateway_cron_runs SET status = ?, finished_at = ?, ledger_id = ?, error = ? "
                 "WHERE id = ?", (status, now, ledger_id, error, run_id))
    row = conn.execute("SELECT job_id FROM gateway_cron_runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        return 0, False
    job_id = row[0]
    if status == "ok":
        conn.execute("UPDATE gateway_cron_jobs SET failures = 0, last_status = 'ok', updated_at = ? WHERE id = ?",
                     (now, job_id))
        return 0, False
    conn.execute("UPDATE gateway_cron_jobs SET failures = failures + 1, last_status = ?, updated_at = ? "
                 "WHERE id = ?", (status, now, job_id))
    got = conn.execute("SELECT failures, paused FROM gateway_cron_jobs WHERE id = ?", (job_id,)).fetchone()
    if got is None:
        return 0, False
    failures, paused = int(got[0]), bool(got[1])
    if pause_after is not None and failures >= pause_after and not paused:
        conn.execute("UPDATE gateway_cron_jobs SET paused = 1, updated_at = ? WHERE id = ?", (now, job_id))
        return failures, True
    return failures, False


def get_run(conn: sqlite3.Connection, run_id: int) -> CronRunRow | None:
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM gateway_cron_runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else _run(row)


def runs_of(conn: sqlite3.Connection, job_id: str, *, limit: int = 20) -> list[CronRunRow]:
    """The job's latest runs, newest first."""
    rows = conn.execute(f"SELECT {_RUN_COLUMNS} FROM gateway_cron_runs WHERE job_id = ? ORDER BY id DESC "
                        f"LIMIT {int(limit)}", (job_id,)).fetchall()
    return [_run(r) for r in rows]


def remember_owner(conn: sqlite3.Connection, session_key: str, session_id: str, *, platform: str,
                   user_id: str | None, now: float) -> None:
    """The owner's chat may see and /resume a run's session (its binding history), without the
    chat's own conversation moving there."""
    conn.execute("INSERT OR IGNORE INTO gateway_session_bindings (session_key, session_id, platform, user_id, "
                 "first_bound_at) VALUES (?, ?, ?, ?, ?)", (session_key, session_id, platform, user_id, now))
