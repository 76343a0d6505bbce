"""Background turns (/bg): one row per task, from its start to how it ended.

status: running -> done | failed | stopped | interrupted. The answer's delivery-ledger row
and 'done' commit with the answer itself (``finish``), so a crash leaves either a running
row (cut off: told "interrupted" at the next start) or a ledger row the recovery sends.
"""

from __future__ import annotations

import sqlite3

from .._records import BackgroundTask

__all__ = ["BackgroundTask", "finish", "get", "insert", "interrupt_running", "set_session"]

_COLUMNS = ("id, chat_session_key, platform, chat_id, thread_id, user_id, reply_to, prompt, session_id, status, "
            "ledger_id, error, created_at, finished_at")


def _task(r: sqlite3.Row | tuple[object, ...]) -> BackgroundTask:
    return BackgroundTask(*tuple(r))


def insert(conn: sqlite3.Connection, task: BackgroundTask) -> None:
    conn.execute(f"INSERT INTO gateway_background_tasks ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (task.id, task.chat_session_key, task.platform, task.chat_id, task.thread_id, task.user_id,
                  task.reply_to, task.prompt, task.session_id, task.status, task.ledger_id, task.error,
                  task.created_at, task.finished_at))


def get(conn: sqlite3.Connection, task_id: str) -> BackgroundTask | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM gateway_background_tasks WHERE id = ?", (task_id,)).fetchone()
    return None if row is None else _task(row)


def set_session(conn: sqlite3.Connection, task_id: str, session_id: str) -> None:
    conn.execute("UPDATE gateway_background_tasks SET session_id = ? WHERE id = ?", (session_id, task_id))


def finish(conn: sqlite3.Connection, task_id: str, status: str, *, now: float, ledger_id: int | None = None,
           error: str | None = None) -> bool:
    """Settle a running task; False when it was settled already (a stop raced its answer)."""
    return conn.execute(
        "UPDATE gateway_background_tasks SET status = ?, finished_at = ?, ledger_id = COALESCE(?, ledger_id), "
        "error = ? WHERE id = ? AND status = 'running'", (status, now, ledger_id, error, task_id),
    ).rowcount == 1


def interrupt_running(conn: sqlite3.Connection, *, now: float) -> list[BackgroundTask]:
    """Mark every task still 'running' (a crash cut it off) interrupted; those tasks."""
    rows = [_task(r) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM gateway_background_tasks WHERE status = 'running' ORDER BY created_at")]
    conn.execute("UPDATE gateway_background_tasks SET status = 'interrupted', finished_at = ?, "
                 "error = 'cut off by a restart' WHERE status = 'running'", (now,))
    return rows
