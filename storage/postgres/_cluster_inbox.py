"""The hand-off inbox: a message that reached a node not owning its session key, for the owner.

The receiving node writes the row with ``put_inbox`` in the same transaction as its inbound
dedupe row, so the message is stored exactly once or not at all (unstored, the platform
redelivers); ``pg_notify`` in that transaction wakes the owner at COMMIT. The owner takes its
rows with ``claim_inbox`` under its lane lease's token, oldest first. A row is done when the
owner records its message as seen (``inbound.record`` settles it, in the transaction that
stores a turn's question), when the router answered it without a turn (``finish_inbox``),
or when the lane ran dry (``finish_claimed``). So a row not done is a message whose question
was never stored: when the owner dies, whoever takes the lane over (a new token) claims those
rows again and runs them, and a row done is never run again. A NOTIFY can be
missed (a listener reconnecting): ``pending_keys`` and ``orphan_keys`` are the poll that finds
what a wake-up would have said.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from ._conn import PgConnection
from ._store import PgStore

#: the NOTIFY channel; a notification's payload is ``"<owner node id>\t<session key>"``
INBOX_CHANNEL = "hermes_inbox"
_NOW = "extract(epoch from now())::float8"
#: NOTIFY payloads are limited to 8000 bytes; a longer key wakes the owner without naming it
_PAYLOAD_MAX = 7900
_FENCE = (
    "SELECT 1 FROM cluster_leases WHERE kind = 'lane' AND name = %s AND node_id = %s AND token = %s"
    f" AND expires_at > {_NOW} FOR SHARE"
)


@dataclass(frozen=True)
class InboxRow:
    id: int
    session_key: str
    payload: str
    from_node: str
    created_at: float


def put_inbox(conn: PgConnection, session_key: str, payload: str, *, from_node: str, owner_node: str,
              platform: str | None = None, delivery_key: str | None = None) -> int:
    """Store a message for the key's owner and wake it at COMMIT; the row's id. With its
    ``delivery_key``, recording the message as seen (``inbound.record``) settles the row."""
    row = conn.execute(
        "INSERT INTO cluster_inbox (session_key, payload, from_node, created_at, platform, delivery_key)"
        f" VALUES (%s, %s, %s, {_NOW}, %s, %s) RETURNING id",
        (session_key, payload, from_node, platform, delivery_key),
    ).fetchone()
    assert row is not None
    note = f"{owner_node}\t{session_key}"
    if len(note.encode()) > _PAYLOAD_MAX:
        note = f"{owner_node}\t"
    conn.execute("SELECT pg_notify(%s, %s)", (INBOX_CHANNEL, note))
    return int(row[0])


def claim_inbox(conn: PgConnection, session_key: str, node_id: str, token: int, *, limit: int = 100) -> list[InboxRow]:
    """The key's rows not yet claimed under this token, oldest first, now claimed by it; none
    when the node does not hold the lane under ``token``.

    Rows are locked ``SKIP LOCKED`` (a claim never waits on another's transaction), and only the
    unbroken run from the oldest is taken: a locked row skipped would put a later message
    before it."""
    if conn.execute(_FENCE, (session_key, node_id, token)).fetchone() is None:
        return []
    ids = [
        int(r[0])
        for r in conn.execute(
            "SELECT id FROM cluster_inbox WHERE session_key = %s AND done_at IS NULL"
            " AND claim_token IS DISTINCT FROM %s ORDER BY id LIMIT %s",
            (session_key, token, limit),
        ).fetchall()
    ]
    if not ids:
        return []
    locked = conn.execute(
        "SELECT id, session_key, payload, from_node, created_at FROM cluster_inbox"
        " WHERE id = ANY(%s) AND done_at IS NULL ORDER BY id FOR UPDATE SKIP LOCKED",
        (ids,),
    ).fetchall()
    taken: list[InboxRow] = []
    for want, row in zip(ids, locked, strict=False):
        if int(row[0]) != want:
            break
        taken.append(InboxRow(int(row[0]), str(row[1]), str(row[2]), str(row[3]), float(row[4])))
    if taken:
        conn.execute(
            f"UPDATE cluster_inbox SET claimed_by = %s, claim_token = %s, claimed_at = {_NOW} WHERE id = ANY(%s)",
            (node_id, token, [r.id for r in taken]),
        )
    return taken


def finish_inbox(conn: PgConnection, inbox_id: int, node_id: str, token: int) -> bool:
    """Mark a claimed row done, in the transaction that stores its turn's answer. False when the
    node no longer holds the lane under ``token`` or the row is done already: the caller must
    then roll its transaction back (the new owner runs the message; storing both would answer
    it twice)."""
    row = conn.execute("SELECT session_key FROM cluster_inbox WHERE id = %s", (inbox_id,)).fetchone()
    if row is None or conn.execute(_FENCE, (row[0], node_id, token)).fetchone() is None:
        return False
    cur = conn.execute(
        f"UPDATE cluster_inbox SET done_at = {_NOW}, done_by = %s"
        " WHERE id = %s AND done_at IS NULL AND claim_token = %s",
        (node_id, inbox_id, token),
    )
    return cur.rowcount == 1


def finish_claimed(conn: PgConnection, session_key: str, node_id: str, token: int) -> int:
    """Settle the rows this node claimed for ``session_key`` under ``token``: its lane ran dry, so
    each ran here (a turn's question settles its row itself; a command or a turn that stored
    nothing is settled here, never run again)."""
    cur = conn.execute(
        f"UPDATE cluster_inbox SET done_at = {_NOW}, done_by = %s"
        " WHERE session_key = %s AND claimed_by = %s AND claim_token = %s AND done_at IS NULL",
        (node_id, session_key, node_id, token),
    )
    return cur.rowcount


def pending_keys(conn: PgConnection, node_id: str) -> list[str]:
    """Keys whose lane the node holds with rows it has not claimed under its current token."""
    rows = conn.execute(
        "SELECT DISTINCT i.session_key FROM cluster_inbox i JOIN cluster_leases l"
        "  ON l.kind = 'lane' AND l.name = i.session_key"
        f" WHERE i.done_at IS NULL AND l.node_id = %s AND l.expires_at > {_NOW}"
        "  AND i.claim_token IS DISTINCT FROM l.token ORDER BY 1",
        (node_id,),
    ).fetchall()
    return [str(r[0]) for r in rows]


def orphan_keys(conn: PgConnection, *, limit: int = 100) -> list[str]:
    """Keys with rows waiting and no live owner (it died, or gave the lane up as a row came):
    a node takes their lanes over and runs them."""
    rows = conn.execute(
        "SELECT DISTINCT i.session_key FROM cluster_inbox i WHERE i.done_at IS NULL AND NOT EXISTS ("
        "  SELECT 1 FROM cluster_leases l WHERE l.kind = 'lane' AND l.name = i.session_key"
        f"  AND l.expires_at > {_NOW}) ORDER BY 1 LIMIT %s",
        (limit,),
    ).fetchall()
    return [str(r[0]) for r in rows]


def sweep_inbox(conn: PgConnection, *, done_for: float) -> int:
    """Delete rows done more than ``done_for`` seconds ago."""
    cur = conn.execute(f"DELETE FROM cluster_inbox WHERE done_at < {_NOW} - %s", (done_for,))
    return cur.rowcount


async def inbox_wakeups(store: PgStore) -> AsyncIterator[tuple[str, str]]:
    """``(owner node, session key)`` for each hand-off NOTIFY (``PgStore.notifications``); the
    first item is ``("", "")``, once LISTEN is in place: the caller polls then."""
    async for payload in store.notifications(INBOX_CHANNEL):
        if payload is None:
            yield "", ""
        else:
            owner, _, key = payload.partition("\t")
            yield owner, key
