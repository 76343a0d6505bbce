"""The files that came with messages (``gateway_attachments``): one row per file, its
bytes in the media store (``storage.MediaStore``) under the row's ``sha256``.

Rows go in the transaction that deletes their messages (``ops.delete_session``,
``ops.clear_messages``, ``ops.prune``); files are outside any transaction, so the
caller removes them after the commit with ``MediaStore.sweep``, which asks
``referenced`` which digests some row still uses. Many rows may name one file
(the same bytes sent twice): a file goes when its last row has gone.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from .._model import AttachmentRow

_T = TypeVar("_T")
_COLUMNS = "id, message_id, session_id, kind, mime, name, size, sha256, description, created_at"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_PREFIX = re.compile(r"[0-9a-f]{12,64}")
_CHUNK = 500  # SQLite's bound-parameter limit is far above; keeps each statement small


def _row(r: Sequence[Any]) -> AttachmentRow:
    return AttachmentRow(int(r[0]), int(r[1]), str(r[2]), str(r[3]), r[4], r[5], int(r[6]), str(r[7]), r[8],
                         float(r[9]))


def _chunks(values: Iterable[_T]) -> Iterator[list[_T]]:
    items = list(values)
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _marks(chunk: Sequence[object]) -> str:
    return ",".join("?" * len(chunk))


def add(conn: sqlite3.Connection, *, message_id: int, session_id: str, kind: str, mime: str | None,
        name: str | None, size: int, sha256: str, description: str | None = None,
        created_at: float | None = None) -> int:
    """A row for a file of message ``message_id`` (stored in the same transaction); its id."""
    if _HEX64.fullmatch(sha256) is None:
        raise ValueError("sha256 must be 64 lowercase hex characters")
    cur = conn.execute(
        f"INSERT INTO gateway_attachments ({_COLUMNS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (message_id, session_id, kind, mime, name, size, sha256, description,
         time.time() if created_at is None else created_at),
    )
    return int(cur.lastrowid or 0)


def for_session(conn: sqlite3.Connection, session_id: str) -> list[AttachmentRow]:
    """The session's rows in the order they were stored (what a session export lists)."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM gateway_attachments WHERE session_id = ? ORDER BY id",
                        (session_id,)).fetchall()
    return [_row(r) for r in rows]


def for_messages(conn: sqlite3.Connection, message_ids: Iterable[int]) -> dict[int, list[AttachmentRow]]:
    """message id -> its rows in stored order; messages without any are left out."""
    found: dict[int, list[AttachmentRow]] = {}
    for chunk in _chunks(set(message_ids)):
        for r in conn.execute(f"SELECT {_COLUMNS} FROM gateway_attachments WHERE message_id IN ({_marks(chunk)}) "
                              "ORDER BY id", chunk):
            row = _row(r)
            found.setdefault(row.message_id, []).append(row)
    return {mid: found[mid] for mid in sorted(found)}


def by_digest(conn: sqlite3.Connection, session_id: str, prefix: str) -> AttachmentRow | None:
    """The session's newest row whose sha256 starts with ``prefix`` (12 to 64 lowercase hex
    characters, the form a marker in a message shows); None for no such row, or a prefix
    that is not hex of that length."""
    if _PREFIX.fullmatch(prefix) is None:
        return None
    # A range on the index rather than LIKE: hex digits sort below 'g'.
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM gateway_attachments WHERE session_id = ? AND sha256 >= ? AND sha256 < ? "
        "ORDER BY created_at DESC, id DESC LIMIT 1",
        (session_id, prefix, prefix + "g"),
    ).fetchone()
    return None if row is None else _row(row)


def set_description(conn: sqlite3.Connection, attachment_id: int, text: str | None) -> bool:
    """Record what the file shows or says; False when the row is gone."""
    cur = conn.execute("UPDATE gateway_attachments SET description = ? WHERE id = ?", (text, attachment_id))
    return cur.rowcount > 0


def referenced(conn: sqlite3.Connection, sha256s: Iterable[str]) -> set[str]:
    """Those of ``sha256s`` some row still names (the files a sweep must keep)."""
    found: set[str] = set()
    for chunk in _chunks(set(sha256s)):
        found.update(str(r[0]) for r in conn.execute(
            f"SELECT DISTINCT sha256 FROM gateway_attachments WHERE sha256 IN ({_marks(chunk)})", chunk))
    return found


def orphans(conn: sqlite3.Connection, sha256s: Iterable[str]) -> set[str]:
    """Those of ``sha256s`` no row names any more (their files may go)."""
    wanted = set(sha256s)
    return wanted - referenced(conn, wanted)


def expired(conn: sqlite3.Connection, before: float) -> list[AttachmentRow]:
    """Rows stored before ``before`` (a time), oldest first."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM gateway_attachments WHERE created_at < ? ORDER BY created_at, id",
                        (before,)).fetchall()
    return [_row(r) for r in rows]


def all_rows(conn: sqlite3.Connection) -> list[AttachmentRow]:
    """Every row, oldest first: what ``storage.retention_plan`` plans from."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM gateway_attachments ORDER BY created_at, id").fetchall()
    return [_row(r) for r in rows]


def total_bytes_by_sha(conn: sqlite3.Connection) -> dict[str, int]:
    """sha256 -> the size of its file, for every file some row names (counted once however many do)."""
    return {str(r[0]): int(r[1]) for r in conn.execute(
        "SELECT sha256, MAX(size) FROM gateway_attachments GROUP BY sha256 ORDER BY sha256")}


def _delete_where(conn: sqlite3.Connection, column: str, values: Iterable[object]) -> list[str]:
    gone: set[str] = set()
    for chunk in _chunks(set(values)):
        where = f"WHERE {column} IN ({_marks(chunk)})"
        gone.update(str(r[0]) for r in conn.execute(f"SELECT DISTINCT sha256 FROM gateway_attachments {where}", chunk))
        conn.execute(f"DELETE FROM gateway_attachments {where}", chunk)
    return sorted(gone)


def delete_rows(conn: sqlite3.Connection, ids: Iterable[int]) -> list[str]:
    """Delete these rows; the sha256s they named (other rows may still name some: ``orphans``)."""
    return _delete_where(conn, "id", ids)


def delete_for_sessions(conn: sqlite3.Connection, session_ids: Iterable[str]) -> list[str]:
    """Delete the rows of these sessions (their messages are going); the sha256s they named."""
    return _delete_where(conn, "session_id", session_ids)


def delete_dangling(conn: sqlite3.Connection) -> list[str]:
    """Delete rows whose message is gone (a tool that knows only the reference schema deleted
    it); the sha256s they named. Message ids are never reused (AUTOINCREMENT)."""
    ids = [int(r[0]) for r in conn.execute(
        "SELECT a.id FROM gateway_attachments a WHERE NOT EXISTS "
        "(SELECT 1 FROM messages m WHERE m.id = a.message_id AND m.session_id = a.session_id)")]
    return delete_rows(conn, ids)
