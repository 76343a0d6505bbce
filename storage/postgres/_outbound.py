"""The outbound delivery ledger (``gateway_outbound``): every reply is a row
before it is sent, and is marked when it was (or could not be).

Claiming across nodes: the gateway claims what a crash cut off in one write,
``expire_pending`` + ``pending`` + ``mark_recovering``, and then sends what it claimed. With one
SQLite writer nothing can come between the read and the mark. Here several nodes may run that
write at once, so inside a read-write transaction ``pending`` selects ``FOR UPDATE SKIP LOCKED``:
the rows it returns stay locked by this transaction until it commits (their mark to
``recovering`` with them), and a concurrent claimer skips them instead of waiting and then sending
them a second time. A claimer whose statement starts after that commit sees them ``recovering``
and leaves them too, so each row is claimed by exactly one node. In a read-only transaction it is
the plain read it is on SQLite (PostgreSQL refuses row locks there).

Relaying: a node that does not hold its platform's connection marks the row ``relay`` and
NOTIFYs channel ``hermes_relay`` (payload: the platform) with it, delivered at COMMIT; the node
that holds the connection takes the rows ``FOR UPDATE SKIP LOCKED`` and marks them ``relaying`` in
the same transaction, so two nodes taking at once never take one row twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from .._model import LedgerFile, PendingReply
from ._conn import PgConnection


def record(conn: PgConnection, *, session_key: str | None, session_id: str | None, platform: str,
           chat_id: str, thread_id: str | None, reply_to: str | None, text: str, now: float,
           files: Sequence[LedgerFile] = ()) -> int:
    """A new ``pending`` row; its id."""
    row = conn.execute(
        "INSERT INTO gateway_outbound (session_key, session_id, platform, chat_id, thread_id, reply_to, "
        "text, created_at, files) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (session_key, session_id, platform, chat_id, thread_id, reply_to, text, now, _files_json(files)),
    ).fetchone()
    return int(row[0]) if row is not None else 0


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


def set_files(conn: PgConnection, ledger_id: int, files: Sequence[LedgerFile]) -> None:
    """The reply's files, as they are now (one was added after its answer was stored)."""
    conn.execute("UPDATE gateway_outbound SET files = %s WHERE id = %s", (_files_json(files), ledger_id))


def set_files_sent(conn: PgConnection, ledger_id: int, count: int) -> None:
    """The platform has taken the first ``count`` files of the reply (a retry sends the rest); 0:
    its text is out, none of its files yet."""
    conn.execute("UPDATE gateway_outbound SET files_sent = GREATEST(COALESCE(files_sent, 0), %s) WHERE id = %s",
                 (count, ledger_id))


def files_referenced(conn: PgConnection, sha256s: Iterable[str], *, since: float) -> set[str]:
    """Those of ``sha256s`` that a reply written since ``since`` carries (its files are kept)."""
    wanted = set(sha256s)
    found: set[str] = set()
    rows = conn.execute("SELECT files FROM gateway_outbound WHERE files IS NOT NULL AND created_at >= %s", (since,))
    for (raw,) in rows:
        found.update(f.sha256 for f in _files(raw) if f.sha256 in wanted)
    return found


def open_stream(conn: PgConnection, *, session_key: str | None, session_id: str | None, platform: str,
                chat_id: str, thread_id: str | None, reply_to: str | None, message_ids: Sequence[str],
                now: float) -> int:
    """A ``streaming`` row for an answer shown while it is written (no text yet); its id."""
    row = conn.execute(
        "INSERT INTO gateway_outbound (session_key, session_id, platform, chat_id, thread_id, reply_to, "
        "text, status, message_ids, created_at) VALUES (%s, %s, %s, %s, %s, %s, '', 'streaming', %s, %s) "
        "RETURNING id",
        (session_key, session_id, platform, chat_id, thread_id, reply_to, json.dumps(list(message_ids)), now),
    ).fetchone()
    return int(row[0]) if row is not None else 0


def set_message_ids(conn: PgConnection, ledger_id: int, message_ids: Sequence[str]) -> bool:
    """Record the messages a stream shows; False when its row is gone (or was never committed)."""
    cur = conn.execute(
        "UPDATE gateway_outbound SET message_ids = %s WHERE id = %s AND status IN ('streaming', 'pending')",
        (json.dumps(list(message_ids)), ledger_id),
    )
    return cur.rowcount > 0


def settle_stream(conn: PgConnection, ledger_id: int, text: str, session_id: str | None,
                  files: Sequence[LedgerFile] = ()) -> bool:
    """The streamed answer is stored: its row becomes a ``pending`` reply with the final text.
    False when there is no such streaming row."""
    cur = conn.execute(
        "UPDATE gateway_outbound SET text = %s, session_id = COALESCE(%s, session_id), status = 'pending', "
        "files = %s WHERE id = %s AND status = 'streaming'",
        (text, session_id, _files_json(files), ledger_id),
    )
    return cur.rowcount > 0


def mark(conn: PgConnection, ledger_id: int, status: str, error: str | None, *, now: float) -> None:
    """Set a row's status and error and count the attempt; ``sent`` and ``recovered`` also set ``sent_at``."""
    conn.execute(
        "UPDATE gateway_outbound SET status = %(status)s, attempts = attempts + 1, error = %(error)s, "
        "sent_at = CASE WHEN %(status)s IN ('sent', 'recovered') THEN %(now)s ELSE sent_at END WHERE id = %(id)s",
        {"status": status, "error": error, "now": now, "id": ledger_id},
    )


def expire_pending(conn: PgConnection, platform: str, *, created_before: float) -> None:
    """Mark the platform's ``pending`` rows written before ``created_before`` as ``expired``."""
    conn.execute(
        "UPDATE gateway_outbound SET status = 'expired' WHERE platform = %s "
        "AND status IN ('pending', 'streaming') AND created_at < %s",
        (platform, created_before),
    )


def pending(conn: PgConnection, platform: str, *, created_before: float | None = None) -> list[PendingReply]:
    """The platform's ``pending`` rows and cut-off ``streaming`` ones, oldest first (with
    ``created_before``: only those written before it). In a read-write transaction the rows are
    claimed for it (locked until it ends; rows another transaction holds are skipped)."""
    query = (
        "SELECT id, platform, chat_id, thread_id, reply_to, text, created_at, message_ids, status, files, "
        "files_sent FROM gateway_outbound WHERE platform = %s AND status IN ('pending', 'streaming') "
        "AND created_at < %s ORDER BY id"
    )
    if _writable(conn):
        query += " FOR UPDATE SKIP LOCKED"
    rows = conn.execute(query, (platform, float("inf") if created_before is None else created_before)).fetchall()
    return [PendingReply(r[0], r[1], r[2], r[3], r[4], r[5], r[6], message_ids=_ids(r[7]),
                         interrupted=r[8] == "streaming", files=_files(r[9]),
                         files_sent=None if r[10] is None else int(r[10]))
            for r in rows]


def _writable(conn: PgConnection) -> bool:
    row = conn.execute("SELECT current_setting('transaction_read_only') = 'off'").fetchone()
    return bool(row is not None and row[0])


#: the NOTIFY channel of ``relay`` (its payload: the row's platform)
RELAY_CHANNEL = "hermes_relay"


def relay(conn: PgConnection, ledger_id: int) -> bool:
    """Hand a ``pending`` row to the node connected to its platform, woken by a NOTIFY at
    COMMIT. False when the row is not pending."""
    row = conn.execute(
        "UPDATE gateway_outbound SET status = 'relay' WHERE id = %s AND status = 'pending' RETURNING platform",
        (ledger_id,),
    ).fetchone()
    if row is None:
        return False
    conn.execute("SELECT pg_notify(%s, %s)", (RELAY_CHANNEL, row[0]))
    return True


def take_relayed(conn: PgConnection, platform: str, limit: int) -> list[PendingReply]:
    """Up to ``limit`` of the platform's ``relay`` rows, oldest first, claimed for sending
    (``relaying``); rows another node's transaction is taking are skipped, not waited for."""
    rows = conn.execute(
        "SELECT id, platform, chat_id, thread_id, reply_to, text, created_at, files FROM gateway_outbound "
        "WHERE platform = %s AND status = 'relay' ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
        (platform, limit),
    ).fetchall()
    if rows:
        conn.execute("UPDATE gateway_outbound SET status = 'relaying' WHERE id = ANY(%s)", ([int(r[0]) for r in rows],))
    return [PendingReply(r[0], r[1], r[2], r[3], r[4], r[5], r[6], files=_files(r[7])) for r in rows]


def _ids(raw: str | None) -> tuple[str, ...]:
    try:
        value = json.loads(raw) if raw else []
    except ValueError:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def mark_recovering(conn: PgConnection, ledger_ids: Iterable[int]) -> None:
    ids = [int(ledger_id) for ledger_id in ledger_ids]
    if ids:
        conn.execute("UPDATE gateway_outbound SET status = 'recovering' WHERE id = ANY(%s)", (ids,))


def last_failure(conn: PgConnection, session_key: str) -> str | None:
    """The error of the key's latest ``failed`` row (None when there is none, or it has no error)."""
    row = conn.execute(
        "SELECT error FROM gateway_outbound WHERE session_key = %s AND status = 'failed' ORDER BY id DESC LIMIT 1",
        (session_key,),
    ).fetchone()
    return None if row is None or row["error"] is None else str(row["error"])
