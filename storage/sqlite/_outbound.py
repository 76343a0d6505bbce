"""The outbound delivery ledger (``gateway_outbound``): every reply is a row
before it is sent, and is marked when it was (or could not be).

Statuses: ``pending`` (to send), ``streaming`` (shown while written), ``recovering`` (claimed
after a crash), ``relay`` (several nodes: for the node connected to its platform, which takes it
as ``relaying``), then ``sent``, ``recovered``, ``failed`` or ``expired``. A ``relay`` row is
neither expired nor recovered: it waits for that node, however long its platform is away."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence

from .._model import LedgerFile, PendingReply


def record(conn: sqlite3.Connection, *, session_key: str | None, session_id: str | None, platform: str,
           chat_id: str, thread_id: str | None, reply_to: str | None, text: str, now: float,
           files: Sequence[LedgerFile] = ()) -> int:
    """A new ``pending`` row; its id."""
    cur = conn.execute(
        "INSERT INTO gateway_outbound (session_key, session_id, platform, chat_id, thread_id, reply_to, "
        "text, created_at, files) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (session_key, session_id, platform, chat_id, thread_id, reply_to, text, now, _files_json(files)),
    )
    return int(cur.lastrowid or 0)


def _files_json(files: Sequence[LedgerFile]) -> str | None:
    if not files:
        return None
    return json.dumps([{"sha256": f.sha256, "name": f.name, "mime": f.mime, "kind": f.kind, "size": f.size}
                       for f in files])


def _files(raw: str | None) -> tuple[LedgerFile, ...]:
    try:
        value = json.loads(raw) if raw else []
        return tuple(LedgerFile(str(f["sha256"]), str(f["name"]), str(f["mime"]), str(f["kind"]), int(f["size"]))
                     for f in value)
    except (ValueError, TypeError, KeyError):
        return ()


def set_files(conn: sqlite3.Connection, ledger_id: int, files: Sequence[LedgerFile]) -> None:
    """The reply's files, as they are now (one was added after its answer was stored)."""
    conn.execute("UPDATE gateway_outbound SET files = ? WHERE id = ?", (_files_json(files), ledger_id))


def set_files_sent(conn: sqlite3.Connection, ledger_id: int, count: int) -> None:
    """The platform has taken the first ``count`` files of the reply (a retry sends the rest); 0:
    its text is out, none of its files yet."""
    conn.execute("UPDATE gateway_outbound SET files_sent = MAX(COALESCE(files_sent, 0), ?) WHERE id = ?", (count, ledger_id))


def files_referenced(conn: sqlite3.Connection, sha256s: Iterable[str], *, since: float) -> set[str]:
    """Those of ``sha256s`` that a reply written since ``since`` carries (its files are kept)."""
    wanted = set(sha256s)
    found: set[str] = set()
    rows = conn.execute("SELECT files FROM gateway_outbound WHERE files IS NOT NULL AND created_at >= ?", (since,))
    for (raw,) in rows:
        found.update(f.sha256 for f in _files(raw) if f.sha256 in wanted)
    return found


def open_stream(conn: sqlite3.Connection, *, session_key: str | None, session_id: str | None, platform: str,
                chat_id: str, thread_id: str | None, reply_to: str | None, message_ids: Sequence[str],
                now: float) -> int:
    """A ``streaming`` row for an answer shown while it is written (no text yet); its id."""
    cur = conn.execute(
        "INSERT INTO gateway_outbound (session_key, session_id, platform, chat_id, thread_id, reply_to, "
        "text, status, message_ids, created_at) VALUES (?, ?, ?, ?, ?, ?, '', 'streaming', ?, ?)",
        (session_key, session_id, platform, chat_id, thread_id, reply_to, json.dumps(list(message_ids)), now),
    )
    return int(cur.lastrowid or 0)


def set_message_ids(conn: sqlite3.Connection, ledger_id: int, message_ids: Sequence[str]) -> bool:
    """Record the messages a stream shows; False when its row is gone (or was never committed)."""
    cur = conn.execute("UPDATE gateway_outbound SET message_ids = ? WHERE id = ? AND status IN ('streaming', 'pending')",
                       (json.dumps(list(message_ids)), ledger_id))
    return cur.rowcount > 0


def settle_stream(conn: sqlite3.Connection, ledger_id: int, text: str, session_id: str | None,
                  files: Sequence[LedgerFile] = ()) -> bool:
    """The streamed answer is stored: its row becomes a ``pending`` reply with the final text.
    False when there is no such streaming row."""
    cur = conn.execute(
        "UPDATE gateway_outbound SET text = ?, session_id = COALESCE(?, session_id), status = 'pending', "
        "files = ? WHERE id = ? AND status = 'streaming'",
        (text, session_id, _files_json(files), ledger_id),
    )
    return cur.rowcount > 0


def mark(conn: sqlite3.Connection, ledger_id: int, status: str, error: str | None, *, now: float) -> None:
    """Set a row's status and error and count the attempt; ``sent`` and ``recovered`` also set ``sent_at``."""
    conn.execute(
        "UPDATE gateway_outbound SET status = ?, attempts = attempts + 1, error = ?, "
        "sent_at = CASE WHEN ? IN ('sent', 'recovered') THEN ? ELSE sent_at END WHERE id = ?",
        (status, error, status, now, ledger_id),
    )


def expire_pending(conn: sqlite3.Connection, platform: str, *, created_before: float) -> None:
    """Mark the platform's ``pending`` rows written before ``created_before`` as ``expired``."""
    conn.execute(
        "UPDATE gateway_outbound SET status = 'expired' WHERE platform = ? "
        "AND status IN ('pending', 'streaming') AND created_at < ?",
        (platform, created_before),
    )


def pending(conn: sqlite3.Connection, platform: str, *, created_before: float | None = None) -> list[PendingReply]:
    """The platform's ``pending`` rows and cut-off ``streaming`` ones, oldest first (with
    ``created_before``: only those written before it)."""
    rows = conn.execute(
        "SELECT id, platform, chat_id, thread_id, reply_to, text, created_at, message_ids, status, files, "
        "files_sent FROM gateway_outbound WHERE platform = ? AND status IN ('pending', 'streaming') "
        "AND created_at < ? ORDER BY id",
        (platform, float("inf") if created_before is None else created_before),
    ).fetchall()
    return [PendingReply(r[0], r[1], r[2], r[3], r[4], r[5], r[6], message_ids=_ids(r[7]),
                         interrupted=r[8] == "streaming", files=_files(r[9]),
                         files_sent=None if r[10] is None else int(r[10]))
            for r in rows]


def relay(conn: sqlite3.Connection, ledger_id: int) -> bool:
    """Hand a ``pending`` row to the node connected to its platform (several nodes over
    PostgreSQL; one SQLite daemon never relays). False when the row is not pending."""
    cur = conn.execute("UPDATE gateway_outbound SET status = 'relay' WHERE id = ? AND status = 'pending'", (ledger_id,))
    return cur.rowcount > 0


def take_relayed(conn: sqlite3.Connection, platform: str, limit: int) -> list[PendingReply]:
    """Up to ``limit`` of the platform's ``relay`` rows, oldest first, claimed for sending (``relaying``)."""
    rows = conn.execute(
        "SELECT id, platform, chat_id, thread_id, reply_to, text, created_at, files FROM gateway_outbound "
        "WHERE platform = ? AND status = 'relay' ORDER BY id LIMIT ?",
        (platform, limit),
    ).fetchall()
    conn.executemany("UPDATE gateway_outbound SET status = 'relaying' WHERE id = ?", [(r[0],) for r in rows])
    return [PendingReply(r[0], r[1], r[2], r[3], r[4], r[5], r[6], files=_files(r[7])) for r in rows]


def _ids(raw: str | None) -> tuple[str, ...]:
    try:
        value = json.loads(raw) if raw else []
    except ValueError:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def mark_recovering(conn: sqlite3.Connection, ledger_ids: Iterable[int]) -> None:
    conn.executemany("UPDATE gateway_outbound SET status = 'recovering' WHERE id = ?",
                     [(ledger_id,) for ledger_id in ledger_ids])


def last_failure(conn: sqlite3.Connection, session_key: str) -> str | None:
    """The error of the key's latest ``failed`` row (None when there is none, or it has no error)."""
    row = conn.execute(
        "SELECT error FROM gateway_outbound WHERE session_key = ? AND status = 'failed' ORDER BY id DESC LIMIT 1",
        (session_key,),
    ).fetchone()
    return None if row is None or row["error"] is None else str(row["error"])
