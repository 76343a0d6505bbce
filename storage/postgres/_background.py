"""Background turns (/bg) on PostgreSQL: one row per task, from its start to how it ended.

The same functions as SQLite's ``storage.sqlite.background``, returning its ``BackgroundTask``.
status: running -> done | failed | stopped | interrupted; ``finish`` settles a running task once,
whichever node's stop or answer comes first (a conditional UPDATE: the second waits for the
first's COMMIT and then finds the task settled).
"""

from __future__ import annotations

from .._records import BackgroundTask as BackgroundTask
from ._conn import PgConnection, Row
from ._cron import _CUT_OFF

__all__ = ["BackgroundTask", "finish", "get", "insert", "interrupt_running", "set_session"]

_COLUMNS = ("id, chat_session_key, platform, chat_id, thread_id, user_id, reply_to, prompt, session_id, status, "
            "ledger_id, error, created_at, finished_at")


def _task(r: Row) -> BackgroundTask:
    return BackgroundTask(*tuple(r))


def insert(conn: PgConnection, task: BackgroundTask) -> None:
    conn.execute(f"INSERT INTO gateway_background_tasks ({_COLUMNS}) "
                 "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                 (task.id, task.chat_session_key, task.platform, task.chat_id, task.thread_id, task.user_id,
                  task.reply_to, task.prompt, task.session_id, task.status, task.ledger_id, task.error,
                  task.created_at, task.finished_at))


def get(conn: PgConnection, task_id: str) -> BackgroundTask | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM gateway_background_tasks WHERE id = %s", (task_id,)).fetchone()
    return None if row is None else _task(row)


def set_session(conn: PgConnection, task_id: str, session_id: str) -> None:
    conn.execute("UPDATE gateway_background_tasks SET session_id = %s WHERE id = %s", (session_id, task_id))


def finish(conn: PgConnection, task_id: str, status: str, *, now: float, ledger_id: int | None = None,
           error: str | None = None) -> bool:
    """Settle a running task; False when it was settled already (a stop raced its answer)."""
    return conn.execute(
        "UPDATE gateway_background_tasks SET status = %s, finished_at = %s, "
        "ledger_id = COALESCE(%s::bigint, ledger_id), error = %s WHERE id = %s AND status = 'running'",
        (status, now, ledger_id, error, task_id),
    ).rowcount == 1


def interrupt_running(conn: PgConnection, *, now: float) -> list[BackgroundTask]:
    """Mark every task still 'running' (a crash cut it off) interrupted; those tasks, as they were.

    Several nodes: only the tasks of nodes that are gone (``_cron._CUT_OFF``: no
    live connection, or this node before its restart; so: only at a node's start); a live node's
    tasks are left to it. Two nodes starting at once each take the rows the other has not locked
    (SKIP LOCKED): a task is reported once."""
    rows = [_task(r) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM gateway_background_tasks r WHERE status = 'running' AND {_CUT_OFF} "
        "ORDER BY created_at, id COLLATE \"C\" FOR UPDATE OF r SKIP LOCKED").fetchall()]
    if rows:
        conn.execute("UPDATE gateway_background_tasks SET status = 'interrupted', finished_at = %s, "
                     "error = 'cut off by a restart' WHERE id = ANY(%s)", (now, [t.id for t in rows]))
    return rows
