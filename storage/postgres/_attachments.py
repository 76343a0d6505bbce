"""The files that came with messages (``gateway_attachments``), as ``storage.sqlite``'s
``attachments`` keeps them: one row per file, its bytes in the media store under ``sha256``.

Rows go in the transaction that deletes their messages (``ops.delete_session``,
``ops.clear_messages``, ``ops.prune``); the caller sweeps the files after the commit with
``MediaStore.sweep``, which asks ``referenced`` which digests some row still uses.

Lists are passed as one array parameter (``= ANY(%s)``) rather than SQLite's chunks of
placeholders: PostgreSQL has no bound-parameter limit to stay under.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

from .._model import AttachmentRow
from ._conn import PgConnection

_COLUMNS = "id, message_id, session_id, kind, mime, name, size, sha256, description, created_at"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_PREFIX = re.compile(r"[0-9a-f]{12,64}")


def _row(r: Sequence[Any]) -> AttachmentRow:
    return AttachmentRow(int(r[0]), int(r[1]), str(r[2]), str(r[3]), r[4], r[5], int(r[6]), str(r[7]), r[8],
                         float(r[9]))


def add(conn: PgConnection, *, message_id: int, session_id: str, kind: str, mime: str | None,
        name: str | None, size: int, sha256: str, description: str | None = None,
        created_at: float | None = None) -> int:
    """A row for a file of message ``message_id`` (stored in the same transaction); its id."""
    if _HEX64.fullmatch(sha256) is None:
        raise ValueError("sha256 must be 64 lowercase hex characters")
    row = conn.execute(
        "INSERT INTO gateway_attachments (message_id, session_id, kind, mime, name, size, sha256, description, "
        "created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (message_id, session_id, kind, mime, name, size, sha256, description,
         time.time() if created_at is None else created_at),
    ).fetchone()
    assert row is not None
    return int(row[0])


def for_session(conn: PgConnection, session_id: str) -> list[AttachmentRow]:
    """The session's rows in the order they were stored (what a session export lists)."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM gateway_attachments WHERE session_id = %s ORDER BY id",
                        (session_id,)).fetchall()
    return [_row(r) for r in rows]


def for_messages(conn: PgConnection, message_ids: Iterable[int]) -> dict[int, list[AttachmentRow]]:
    """message id -> its rows in stored order; messages without any are left out."""
    found: dict[int, list[AttachmentRow]] = {}
    for r in conn.execute(f"SELECT {_COLUMNS} FROM gateway_attachments WHERE message_id = ANY(%s::bigint[]) "
                          "ORDER BY id", (sorted({int(m) for m in message_ids}),)):
        row = _row(r)
        found.setdefault(row.message_id, []).append(row)
    return {mid: found[mid] for mid in sorted(found)}


def by_digest(conn: PgConnection, session_id: str, prefix: str) -> AttachmentRow | None:
    """The session's newest row whose sha256 starts with ``prefix`` (12 to 64 lowercase hex
    characters, the form a marker in a message shows); None for no such row, or a prefix
    that is not hex of that length."""
    if _PREFIX.fullmatch(prefix) is None:
        return None
    # A range rather than LIKE, compared bytewise (COLLATE "C") as SQLite does whatever the
    # database's collation: hex digits sort below 'g'.
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM gateway_attachments WHERE session_id = %s "
        'AND sha256 COLLATE "C" >= %s AND sha256 COLLATE "C" < %s ORDER BY created_at DESC, id DESC LIMIT 1',
        (session_id, prefix, prefix + "g"),
    ).fetchone()
    return None if row is None else _row(row)


def set_description(conn: PgConnection, attachment_id: int, text: str | None) -> bool:
    """Record what the file shows or says; False when the row is gone."""
    cur = conn.execute("UPDATE gateway_attachments SET description = %s WHERE id = %s", (text, attachment_id))
    return cur.rowcount > 0


def referenced(conn: PgConnection, sha256s: Iterable[str]) -> set[str]:
    """Those of ``sha256s`` some row still names (the files a sweep must keep)."""
    wanted = sorted({str(s) for s in sha256s})
    if not wanted:
        return set()
    return {str(r[0]) for r in conn.execute(
        "SELECT DISTINCT sha256 FROM gateway_attachments WHERE sha256 = ANY(%s::text[])", (wanted,))}


def orphans(conn: PgConnection, sha256s: Iterable[str]) -> set[str]:
    """Those of ``sha256s`` no row names any more (their files may go)."""
    wanted = set(sha256s)
    return wanted - referenced(conn, wanted)


def expired(conn: PgConnection, before: float) -> list[AttachmentRow]:
    """Rows stored before ``before`` (a time), oldest first."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM gateway_attachments WHERE created_at < %s ORDER BY created_at, id",
                        (before,)).fetchall()
    return [_row(r) for r in rows]


def all_rows(conn: PgConnection) -> list[AttachmentRow]:
    """Every row, oldest first: what ``storage.retention_plan`` plans from."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM gateway_attachments ORDER BY created_at, id").fetchall()
    return [_row(r) for r in rows]


def total_bytes_by_sha(conn: PgConnection) -> dict[str, int]:
    """sha256 -> the size of its file, for every file some row names (counted once however many do)."""
    return {str(r[0]): int(r[1]) for r in conn.execute(
        'SELECT sha256, MAX(size) FROM gateway_attachments GROUP BY sha256 ORDER BY sha256 COLLATE "C"')}


def _delete_where(conn: PgConnection, column: str, values: list[Any], array_type: str) -> list[str]:
    if not values:
        return []
    gone = {str(r[0]) for r in conn.execute(
        f"DELETE FROM gateway_attachments WHERE {column} = ANY(%s::{array_type}[]) RETURNING sha256", (values,))}
    return sorted(gone)


def delete_rows(conn: PgConnection, ids: Iterable[int]) -> list[str]:
    """Delete these rows; the sha256s they named (other rows may still name some: ``orphans``)."""
    return _delete_where(conn, "id", sorted({int(i) for i in ids}), "bigint")


def delete_for_sessions(conn: PgConnection, session_ids: Iterable[str]) -> list[str]:
    """Delete the rows of these sessions (their messages are going); the sha256s they named."""
    return _delete_where(conn, "session_id", sorted({str(s) for s in session_ids}), "text")


def delete_dangling(conn: PgConnection) -> list[str]:
    """Delete rows whose message is gone (a tool that knows only the reference schema deleted
    it); the sha256s they named. Message ids are never reused (an identity)."""
    ids = [int(r[0]) for r in conn.execute(
        "SELECT a.id FROM gateway_attachments a WHERE NOT EXISTS "
        "(SELECT 1 FROM messages m WHERE m.id = a.message_id AND m.session_id = a.session_id)")]
    return delete_rows(conn, ids)
