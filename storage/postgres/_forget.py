"""Forgetting one sender on PostgreSQL (/forget-me, ``hermes-gateway users forget``): every row of
theirs, in the caller's one transaction, with a request row that says what is left to do after
the commit.

The same functions, counts and rules as SQLite's ``storage.sqlite.forget`` (its docstring lists
what goes and what is only cleared of their id). SQLite's full-text tables need deletions of
their own; here the search columns live on the message rows, so a deleted or rewritten message
takes its search entry along. What the files need (media bytes, the memory profile) is done
after the commit: the request row (state ``files``) keeps the digests, ``finish`` closes it.

Several nodes: the sessions theirs alone are locked first (``FOR UPDATE``), so a turn another
node is storing in one of them waits for this forget and then fails (its session is gone)
rather than leaving a message of theirs behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from .._senders import FORGOTTEN_MARKER, ForgetOutcome, ForgetRequestRow
from . import _pairing
from ._conn import PgConnection, Row
from ._forget_rows import (
    attachment_ids_of_messages,
    delete_attachments,
    delete_sessions,
    ledger_digests,
    referenced,
    replace_with_marker,
)
from ._userdata import own_message_ids, sessions_of

__all__ = ["TABLE_FORGETTERS", "finish", "forget_sender", "get_request", "referenced_digests", "unfinished"]

#: (what the report calls it, a function of (connection, platform, user id) deleting that table's
#: rows of the sender, returning how many): tables of other features that name a sender.
TABLE_FORGETTERS: tuple[tuple[str, Callable[[PgConnection, str, str], Any]], ...] = (
    ("pairing records", _pairing.forget_user),
)


def _dm_chats(conn: PgConnection, platform: str, user_id: str) -> list[str]:
    return [str(r[0]) for r in conn.execute(
        "SELECT DISTINCT chat_id FROM gateway_session_index WHERE platform = %s AND user_id = %s AND chat_type = 'dm' "
        "AND chat_id IS NOT NULL", (platform, user_id)).fetchall()]


def _outbound(conn: PgConnection, platform: str, alone: list[str], dm_chats: list[str], digests: set[str]) -> int:
    rows = conn.execute(
        "DELETE FROM gateway_outbound WHERE session_id = ANY(%s) OR (platform = %s AND chat_id = ANY(%s)) "
        "RETURNING files", (alone, platform, dm_chats)).fetchall()
    for (raw,) in rows:
        digests.update(ledger_digests(raw))
    return len(rows)


def _dedupe(conn: PgConnection, platform: str, user_id: str, alone: list[str], own: list[int],
            dm_chats: list[str]) -> int:
    n = conn.execute("DELETE FROM gateway_inbound_seen WHERE (platform = %s AND user_id = %s) "
                     "OR session_id = ANY(%s) OR question_id = ANY(%s)", (platform, user_id, alone, own)).rowcount
    # Rows written before step 13 name no sender; a DM's delivery key is <chat>:<message id>.
    # (A plain prefix: SQLite's LIKE there would also take a chat differing only in letter case.)
    if dm_chats:
        n += conn.execute("DELETE FROM gateway_inbound_seen WHERE platform = %s AND EXISTS (SELECT 1 FROM "
                          "unnest(%s::text[]) AS p(prefix) WHERE starts_with(delivery_key, p.prefix))",
                          (platform, [c + ":" for c in dm_chats])).rowcount
    # her messages taken and not yet answered (parked, or handed to another node)
    n += conn.execute("DELETE FROM cluster_inbox WHERE done_at IS NULL AND payload::jsonb ->> 'platform' = %s "
                      "AND payload::jsonb ->> 'user_id' = %s", (platform, user_id)).rowcount
    return n


def _routing(conn: PgConnection, platform: str, user_id: str, alone: list[str]) -> int:
    keys = [str(r[0]) for r in conn.execute(
        "SELECT session_key FROM gateway_session_index WHERE platform = %s AND user_id = %s "
        "UNION SELECT session_key FROM gateway_session_bindings WHERE platform = %s AND user_id = %s",
        (platform, user_id, platform, user_id)).fetchall()]
    n = conn.execute("DELETE FROM gateway_session_index WHERE session_id = ANY(%s)", (alone,)).rowcount
    n += conn.execute("DELETE FROM gateway_session_bindings WHERE session_id = ANY(%s)", (alone,)).rowcount
    # A shared key they happened to bind first stays, without their id.
    conn.execute("UPDATE gateway_session_index SET user_id = NULL WHERE platform = %s AND user_id = %s",
                 (platform, user_id))
    conn.execute("UPDATE gateway_session_bindings SET user_id = NULL WHERE platform = %s AND user_id = %s",
                 (platform, user_id))
    conn.execute("DELETE FROM gateway_pending_titles WHERE session_key = ANY(%s) AND NOT EXISTS "
                 "(SELECT 1 FROM gateway_session_index i WHERE i.session_key = gateway_pending_titles.session_key)",
                 (keys,))
    return n


def forget_sender(conn: PgConnection, platform: str, user_id: str, *, requested_by: str,
                  forget_memory: bool, now: float) -> ForgetOutcome:
    """Delete every row of the sender (see ``storage.sqlite.forget``) and write the request row."""
    sessions = sessions_of(conn, platform, user_id)
    alone = sorted(s.session_id for s in sessions if s.alone)
    conn.execute("SELECT id FROM sessions WHERE id = ANY(%s) ORDER BY id FOR UPDATE", (alone,))
    own = [m for s in sessions if not s.alone for m in own_message_ids(conn, s.session_id, platform, user_id)]
    dm_chats = _dm_chats(conn, platform, user_id)
    digests: set[str] = set()
    counts: dict[str, int] = {}
    counts["sessions deleted"] = len(alone)
    row = conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = ANY(%s)", (alone,)).fetchone()
    counts["messages deleted"] = 0 if row is None else int(row[0])
    digests.update(delete_attachments(conn, "id", attachment_ids_of_messages(conn, own)))
    counts["messages replaced by a marker in shared sessions"] = replace_with_marker(conn, own, FORGOTTEN_MARKER)
    counts["dedupe records"] = _dedupe(conn, platform, user_id, alone, own, dm_chats)
    counts["delivery records"] = _outbound(conn, platform, alone, dm_chats, digests)
    jobs = [str(r[0]) for r in conn.execute(
        "SELECT id FROM gateway_cron_jobs WHERE owner_platform = %s AND owner_user_id = %s",
        (platform, user_id)).fetchall()]
    conn.execute("DELETE FROM gateway_cron_runs WHERE job_id = ANY(%s) OR session_id = ANY(%s)", (jobs, alone))
    counts["scheduled jobs"] = conn.execute("DELETE FROM gateway_cron_jobs WHERE id = ANY(%s)", (jobs,)).rowcount
    conn.execute("DELETE FROM gateway_handoffs WHERE session_id = ANY(%s)", (alone,))
    conn.execute("DELETE FROM gateway_approvals_always WHERE session_id = ANY(%s)", (alone,))
    _routing(conn, platform, user_id, alone)
    digests.update(delete_attachments(conn, "session_id", alone))
    counts["files"] = len(digests)
    delete_sessions(conn, alone)
    conn.execute("DELETE FROM gateway_message_senders WHERE platform = %s AND user_id = %s", (platform, user_id))
    # A shared session they started stays, without their id.
    conn.execute("UPDATE sessions SET user_id = NULL WHERE source = %s AND user_id = %s", (platform, user_id))
    conn.execute("UPDATE gateway_home_channels SET set_by = NULL WHERE platform = %s AND set_by = %s",
                 (platform, user_id))
    conn.execute("UPDATE gateway_approvals_always SET approved_by = NULL WHERE approved_by = %s "
                 "AND session_id IN (SELECT id FROM sessions WHERE source = %s)", (user_id, platform))
    conn.execute("UPDATE gateway_settings SET updated_by = NULL WHERE updated_by IN (%s, %s)",
                 (user_id, f"{platform}:{user_id}"))
    for label, forget in TABLE_FORGETTERS:
        counts[label] = int(forget(conn, platform, user_id) or 0)
    report = {"counts": counts}
    created = conn.execute(
        "INSERT INTO gateway_forget_requests (platform, user_id, requested_by, state, forget_memory, digests, "
        "report, created_at) VALUES (%s, %s, %s, 'files', %s, %s, %s, %s) RETURNING id",
        (platform, user_id, requested_by, int(forget_memory), json.dumps(sorted(digests)), json.dumps(report),
         now)).fetchone()
    assert created is not None
    return ForgetOutcome(int(created[0]), counts, tuple(sorted(digests)), forget_memory)


def _row(r: Row) -> ForgetRequestRow:
    return ForgetRequestRow(int(r["id"]), str(r["platform"]), r["user_id"], str(r["requested_by"]), str(r["state"]),
                            bool(r["forget_memory"]), tuple(json.loads(r["digests"])), json.loads(r["report"]),
                            float(r["created_at"]), r["finished_at"])


_REQUEST = ("SELECT id, platform, user_id, requested_by, state, forget_memory, digests, report, created_at, "
            "finished_at FROM gateway_forget_requests")


def unfinished(conn: PgConnection) -> list[ForgetRequestRow]:
    """Forgets whose rows are gone but whose files were not yet dealt with (a crash came between)."""
    return [_row(r) for r in conn.execute(f"{_REQUEST} WHERE state = 'files' ORDER BY id").fetchall()]


def get_request(conn: PgConnection, request_id: int) -> ForgetRequestRow | None:
    row = conn.execute(f"{_REQUEST} WHERE id = %s", (request_id,)).fetchone()
    return None if row is None else _row(row)


def finish(conn: PgConnection, request_id: int, report: dict[str, Any], *, now: float) -> bool:
    """The files are dealt with: the request is done, and names the person no more (once, whichever
    node finishes it: the state is compared in the UPDATE)."""
    return conn.execute(
        "UPDATE gateway_forget_requests SET state = 'done', user_id = NULL, digests = '[]', report = %s, "
        "finished_at = %s WHERE id = %s AND state = 'files'", (json.dumps(report), now, request_id)).rowcount == 1


def referenced_digests(conn: PgConnection, digests: Iterable[str]) -> set[str]:
    """Those of ``digests`` some attachment row or ledger row still names (their files stay)."""
    return referenced(conn, set(digests))
