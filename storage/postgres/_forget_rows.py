"""The rows of other families that a forget deletes or rewrites, for ``_forget``.

Their own PostgreSQL modules (ops, attachments, outbound) are ported alongside this one; the
forget needs only these few statements of theirs, kept here so that it stands on its own, with
the same effects as SQLite's ``delete_sessions``, ``replace_with_marker``, the attachments'
``delete_rows``/``delete_for_sessions``/``referenced`` and the ledger's ``files_referenced``.
Lists go to PostgreSQL whole (``= ANY(%s)``): no chunks, no limit on bound parameters.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ._conn import PgConnection


def ledger_digests(raw: str | None) -> list[str]:
    """The files' digests of a ledger row's ``files`` (none when it is not the ledger's JSON, as
    SQLite's ledger reads it)."""
    try:
        value = json.loads(raw) if raw else []
        files = [(str(f["sha256"]), str(f["name"]), str(f["mime"]), str(f["kind"]), int(f["size"])) for f in value]
    except (ValueError, TypeError, KeyError):
        return []
    return [f[0] for f in files]


def delete_attachments(conn: PgConnection, column: str, values: Iterable[object]) -> list[str]:
    """Delete the files' rows whose ``column`` (id or session_id) is one of ``values``; the digests
    they named (other rows may still name some)."""
    wanted = sorted(set(values), key=str)
    if not wanted:
        return []
    assert column in ("id", "session_id")
    rows = conn.execute(f"DELETE FROM gateway_attachments WHERE {column} = ANY(%s) RETURNING sha256",
                        (wanted,)).fetchall()
    return sorted({str(r[0]) for r in rows})


def attachment_ids_of_messages(conn: PgConnection, message_ids: list[int]) -> list[int]:
    if not message_ids:
        return []
    return [int(r[0]) for r in conn.execute("SELECT id FROM gateway_attachments WHERE message_id = ANY(%s) ORDER BY id",
                                            (message_ids,)).fetchall()]


def replace_with_marker(conn: PgConnection, message_ids: list[int], marker: str) -> int:
    """These messages' words replaced by ``marker`` in place (a shared conversation keeps its
    shape; the search columns on the row follow the new content); how many were replaced."""
    if not message_ids:
        return 0
    return conn.execute(
        "UPDATE messages SET content = %s, tool_calls = NULL, tool_name = NULL, reasoning = NULL, "
        "reasoning_content = NULL, reasoning_details = NULL, codex_reasoning_items = NULL, "
        "codex_message_items = NULL WHERE id = ANY(%s)", (marker, message_ids)).rowcount


def delete_sessions(conn: PgConnection, ids: list[str]) -> int:
    """Delete these sessions with their messages, files' rows, settings, senders and /retry marks."""
    if not ids:
        return 0
    # Children keep living; they just lose the link to a parent that is gone.
    conn.execute("UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ANY(%s)", (ids,))
    delete_attachments(conn, "session_id", ids)
    for table in ("gateway_session_settings", "gateway_message_senders", "gateway_superseded", "messages"):
        conn.execute(f"DELETE FROM {table} WHERE session_id = ANY(%s)", (ids,))
    return conn.execute("DELETE FROM sessions WHERE id = ANY(%s)", (ids,)).rowcount


def referenced(conn: PgConnection, digests: set[str]) -> set[str]:
    """Those of ``digests`` some files' row or some ledger row still names (their files stay)."""
    if not digests:
        return set()
    found = {str(r[0]) for r in conn.execute(
        "SELECT DISTINCT sha256 FROM gateway_attachments WHERE sha256 = ANY(%s)", (sorted(digests),)).fetchall()}
    for (raw,) in conn.execute("SELECT files FROM gateway_outbound WHERE files IS NOT NULL").fetchall():
        found.update(d for d in ledger_digests(raw) if d in digests)
    return found
