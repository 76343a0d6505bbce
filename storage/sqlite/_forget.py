"""Forgetting one sender (/forget-me, ``hermes-gateway users forget``): every row of theirs, in
the caller's one transaction, with a request row that says what is left to do after the commit.

What goes (``forget_sender``), for (platform, user id) as ``storage.userdata`` finds them:

- the sessions theirs alone, whole (messages, so their FTS rows, files' rows, settings,
  "always" approvals, handoffs, routing-index entries and bindings, queued titles, replies in
  the delivery ledger);
- in shared sessions, their own messages, replaced in place by ``FORGOTTEN_MARKER`` (the FTS
  rows follow by trigger) and the files' rows of those messages;
- their scheduled jobs and the jobs' runs; their dedupe records; the delivery ledger's rows to
  their DM chats (the files an export sent them among them); their sender rows;
- their id where it is only a note of who did something (a binding of a shared key, a home
  channel set, a global setting changed) is cleared, the row stays;
- whatever ``TABLE_FORGETTERS`` deletes (tables of other features, keyed by the sender).

The files (media bytes no other row names, the memory profile) are outside any transaction:
the request row (``gateway_forget_requests``, state ``files``) commits with the deletion and
keeps the digests to sweep; ``finish`` marks it ``done`` and drops the person's id from it.
A process killed before the commit deleted nothing; one killed after it left a ``files`` row
that the next daemon start finishes (``unfinished``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from .._senders import FORGOTTEN_MARKER, ForgetOutcome, ForgetRequestRow
from . import _pairing
from ._attachments import delete_for_sessions, delete_rows, for_messages, referenced
from ._ops import delete_sessions, replace_with_marker
from ._outbound import _files, files_referenced
from ._userdata import own_message_ids, sessions_of

__all__ = ["TABLE_FORGETTERS", "finish", "forget_sender", "get_request", "referenced_digests", "unfinished"]

#: (what the report calls it, a function of (connection, platform, user id) deleting that table's
#: rows of the sender, returning how many): tables of other features that name a sender.
TABLE_FORGETTERS: tuple[tuple[str, Callable[[sqlite3.Connection, str, str], Any]], ...] = (
    ("pairing records", _pairing.forget_user),
)


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _in(conn: sqlite3.Connection, sql: str, values: list[Any], *head: Any) -> int:
    """``sql`` (with ``{marks}``) over ``values`` in chunks; the rows it changed."""
    n = 0
    for start in range(0, len(values), 500):
        chunk = values[start : start + 500]
        n += conn.execute(sql.format(marks=_marks(len(chunk))), (*head, *chunk)).rowcount
    return n


def _dm_chats(conn: sqlite3.Connection, platform: str, user_id: str) -> list[str]:
    return [str(r[0]) for r in conn.execute(
        "SELECT DISTINCT chat_id FROM gateway_session_index WHERE platform = ? AND user_id = ? AND chat_type = 'dm' "
        "AND chat_id IS NOT NULL", (platform, user_id))]


def _outbound(conn: sqlite3.Connection, platform: str, alone: list[str], dm_chats: list[str],
              digests: set[str]) -> int:
    ids: set[int] = set()
    for sql, values in (("SELECT id, files FROM gateway_outbound WHERE session_id IN ({marks})", alone),
                        ("SELECT id, files FROM gateway_outbound WHERE platform = ? AND chat_id IN ({marks})",
                         dm_chats)):
        for start in range(0, len(values), 500):
            chunk = values[start : start + 500]
            head = (platform,) if "platform" in sql else ()
            for row_id, raw in conn.execute(sql.format(marks=_marks(len(chunk))), (*head, *chunk)):
                ids.add(int(row_id))
                digests.update(f.sha256 for f in _files(raw))
    return _in(conn, "DELETE FROM gateway_outbound WHERE id IN ({marks})", sorted(ids))


def _dedupe(conn: sqlite3.Connection, platform: str, user_id: str, alone: list[str], own: list[int],
            dm_chats: list[str]) -> int:
    n = conn.execute("DELETE FROM gateway_inbound_seen WHERE platform = ? AND user_id = ?",
                     (platform, user_id)).rowcount
    # her messages taken and not yet answered
    n += conn.execute("DELETE FROM gateway_parked WHERE platform = ? AND user_id = ?", (platform, user_id)).rowcount
    n += _in(conn, "DELETE FROM gateway_inbound_seen WHERE session_id IN ({marks})", alone)
    n += _in(conn, "DELETE FROM gateway_inbound_seen WHERE question_id IN ({marks})", own)
    # Rows written before step 13 name no sender; a DM's delivery key is <chat>:<message id>.
    for chat in dm_chats:
        escaped = chat.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        n += conn.execute("DELETE FROM gateway_inbound_seen WHERE platform = ? AND delivery_key LIKE ? ESCAPE '\\'",
                          (platform, escaped + ":%")).rowcount
    return n


def _routing(conn: sqlite3.Connection, platform: str, user_id: str, alone: list[str]) -> int:
    keys = [str(r[0]) for r in conn.execute(
        "SELECT session_key FROM gateway_session_index WHERE platform = ? AND user_id = ? "
        "UNION SELECT session_key FROM gateway_session_bindings WHERE platform = ? AND user_id = ?",
        (platform, user_id, platform, user_id))]
    n = _in(conn, "DELETE FROM gateway_session_index WHERE session_id IN ({marks})", alone)
    n += _in(conn, "DELETE FROM gateway_session_bindings WHERE session_id IN ({marks})", alone)
    # A shared key they happened to bind first stays, without their id.
    conn.execute("UPDATE gateway_session_index SET user_id = NULL WHERE platform = ? AND user_id = ?",
                 (platform, user_id))
    conn.execute("UPDATE gateway_session_bindings SET user_id = NULL WHERE platform = ? AND user_id = ?",
                 (platform, user_id))
    gone = [k for k in keys if conn.execute("SELECT 1 FROM gateway_session_index WHERE session_key = ?",
                                            (k,)).fetchone() is None]
    _in(conn, "DELETE FROM gateway_pending_titles WHERE session_key IN ({marks})", gone)
    return n


def forget_sender(conn: sqlite3.Connection, platform: str, user_id: str, *, requested_by: str,
                  forget_memory: bool, now: float) -> ForgetOutcome:
    """Delete every row of the sender (see the module's docstring) and write the request row."""
    sessions = sessions_of(conn, platform, user_id)
    alone = [s.session_id for s in sessions if s.alone]
    own = [m for s in sessions if not s.alone for m in own_message_ids(conn, s.session_id, platform, user_id)]
    dm_chats = _dm_chats(conn, platform, user_id)
    digests: set[str] = set()
    counts: dict[str, int] = {}
    counts["sessions deleted"] = len(alone)
    counts["messages deleted"] = sum(int(conn.execute(
        f"SELECT COUNT(*) FROM messages WHERE session_id IN ({_marks(len(alone[i:i + 500]))})",
        alone[i:i + 500]).fetchone()[0]) for i in range(0, len(alone), 500))
    shared_files = [a.id for rows in for_messages(conn, own).values() for a in rows]
    digests.update(delete_rows(conn, shared_files))
    counts["messages replaced by a marker in shared sessions"] = replace_with_marker(conn, own, FORGOTTEN_MARKER)
    counts["dedupe records"] = _dedupe(conn, platform, user_id, alone, own, dm_chats)
    counts["delivery records"] = _outbound(conn, platform, alone, dm_chats, digests)
    jobs = [str(r[0]) for r in conn.execute(
        "SELECT id FROM gateway_cron_jobs WHERE owner_platform = ? AND owner_user_id = ?", (platform, user_id))]
    _in(conn, "DELETE FROM gateway_cron_runs WHERE job_id IN ({marks})", jobs)
    _in(conn, "DELETE FROM gateway_cron_runs WHERE session_id IN ({marks})", alone)
    counts["scheduled jobs"] = _in(conn, "DELETE FROM gateway_cron_jobs WHERE id IN ({marks})", jobs)
    _in(conn, "DELETE FROM gateway_handoffs WHERE session_id IN ({marks})", alone)
    _in(conn, "DELETE FROM gateway_approvals_always WHERE session_id IN ({marks})", alone)
    _routing(conn, platform, user_id, alone)
    digests.update(delete_for_sessions(conn, alone))
    counts["files"] = len(digests)
    delete_sessions(conn, alone)
    conn.execute("DELETE FROM gateway_message_senders WHERE platform = ? AND user_id = ?", (platform, user_id))
    # A shared session they started stays, without their id.
    conn.execute("UPDATE sessions SET user_id = NULL WHERE source = ? AND user_id = ?", (platform, user_id))
    conn.execute("UPDATE gateway_home_channels SET set_by = NULL WHERE platform = ? AND set_by = ?",
                 (platform, user_id))
    conn.execute("UPDATE gateway_approvals_always SET approved_by = NULL WHERE approved_by = ? "
                 "AND session_id IN (SELECT id FROM sessions WHERE source = ?)", (user_id, platform))
    conn.execute("UPDATE gateway_settings SET updated_by = NULL WHERE updated_by IN (?, ?)",
                 (user_id, f"{platform}:{user_id}"))
    for label, forget in TABLE_FORGETTERS:
        counts[label] = int(forget(conn, platform, user_id) or 0)
    report = {"counts": counts}
    cur = conn.execute(
        "INSERT INTO gateway_forget_requests (platform, user_id, requested_by, state, forget_memory, digests, "
        "report, created_at) VALUES (?, ?, ?, 'files', ?, ?, ?, ?)",
        (platform, user_id, requested_by, int(forget_memory), json.dumps(sorted(digests)), json.dumps(report), now))
    return ForgetOutcome(int(cur.lastrowid or 0), counts, tuple(sorted(digests)), forget_memory)


def _row(r: sqlite3.Row) -> ForgetRequestRow:
    return ForgetRequestRow(int(r["id"]), str(r["platform"]), r["user_id"], str(r["requested_by"]), str(r["state"]),
                            bool(r["forget_memory"]), tuple(json.loads(r["digests"])), json.loads(r["report"]),
                            float(r["created_at"]), r["finished_at"])


_REQUEST = ("SELECT id, platform, user_id, requested_by, state, forget_memory, digests, report, created_at, "
            "finished_at FROM gateway_forget_requests")


def unfinished(conn: sqlite3.Connection) -> list[ForgetRequestRow]:
    """Forgets whose rows are gone but whose files were not yet dealt with (a crash came between)."""
    return [_row(r) for r in conn.execute(f"{_REQUEST} WHERE state = 'files' ORDER BY id")]


def get_request(conn: sqlite3.Connection, request_id: int) -> ForgetRequestRow | None:
    row = conn.execute(f"{_REQUEST} WHERE id = ?", (request_id,)).fetchone()
    return None if row is None else _row(row)


def finish(conn: sqlite3.Connection, request_id: int, report: dict[str, Any], *, now: float) -> bool:
    """The files are dealt with: the request is done, and names the person no more."""
    return conn.execute(
        "UPDATE gateway_forget_requests SET state = 'done', user_id = NULL, digests = '[]', report = ?, "
        "finished_at = ? WHERE id = ? AND state = 'files'", (json.dumps(report), now, request_id)).rowcount == 1


def referenced_digests(conn: sqlite3.Connection, digests: Iterable[str]) -> set[str]:
    """Those of ``digests`` some attachment row or ledger row still names (their files stay)."""
    wanted = set(digests)
    return referenced(conn, wanted) | files_referenced(conn, wanted, since=0.0)
