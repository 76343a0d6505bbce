"""Several nodes over one database: nodes, leases (lanes and roles) and the hand-off inbox.

PostgreSQL only (a single SQLite daemon is the whole cluster). Functions of a connection, as
every family's, composed by the caller into one ``PgStore.write``:

- **nodes**: ``beat`` registers a node and records its heartbeat; ``list_nodes`` for ``status``.
- **leases** (``kind`` ``'lane'``: a session key, served by one node at a time; ``'role'``: a
  long-lived connection such as Telegram polling): ``acquire`` takes a free or expired lease,
  or renews one's own; ``renew_all`` renews every lease a node still holds; ``release``. Each
  take hands out a new fencing token from one sequence (larger than any before it), and
  ``hold_lease`` checks (and share-locks) a lease inside a caller's transaction, so a node
  that lost a lease without knowing cannot commit work under it.
- **inbox** (``_cluster_inbox``): a message that reached a node not owning its key, for the
  owner; see there.
- **handoff wake-ups** (``_cluster_handoffs``): /handoff's rows' news between nodes; see there.
- **relay wake-ups** (``_cluster_relay``): replies left for the node holding their platform.

Expiry is always the database's clock (``now()``): nodes' clocks may disagree, the server's is
one. Concurrency is PostgreSQL's: an acquire is one ``INSERT … ON CONFLICT DO UPDATE … WHERE``
on the lease's row, so two nodes racing for a lease serialize on that row and only one wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from ._cluster_handoffs import HANDOFF_CHANNEL, HandoffNote, handoff_wakeups
from ._cluster_inbox import (
    INBOX_CHANNEL,
    InboxRow,
    claim_inbox,
    finish_claimed,
    finish_inbox,
    inbox_wakeups,
    orphan_keys,
    pending_keys,
    put_inbox,
    sweep_inbox,
)
from ._cluster_relay import relay_wakeups
from ._conn import PgConnection

__all__ = [
    "HANDOFF_CHANNEL",
    "INBOX_CHANNEL",
    "HandoffNote",
    "InboxRow",
    "Lease",
    "LeaseKind",
    "NodeRow",
    "acquire",
    "beat",
    "claim_inbox",
    "db_now",
    "finish_claimed",
    "finish_inbox",
    "handoff_wakeups",
    "hold_lease",
    "holder",
    "inbox_wakeups",
    "leave",
    "list_leases",
    "list_nodes",
    "orphan_keys",
    "pending_keys",
    "prune_nodes",
    "put_inbox",
    "relay_wakeups",
    "release",
    "renew_all",
    "served_ledger_rows",
    "sweep_inbox",
    "sweep_leases",
]

LeaseKind = Literal["lane", "role"]
_NOW = "extract(epoch from now())::float8"


@dataclass(frozen=True)
class Lease:
    """A lease as the database holds it; ``node_id`` is its holder (maybe another node)."""

    kind: str
    name: str
    node_id: str
    token: int
    expires_at: float


@dataclass(frozen=True)
class NodeRow:
    node_id: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    #: seconds since its last heartbeat, by the database's clock
    age: float
    #: what the node reported at its last heartbeat (roles, lanes)
    holds: dict[str, object]
    #: the roles it holds now (live leases)
    roles: tuple[str, ...]


def db_now(conn: PgConnection) -> float:
    row = conn.execute(f"SELECT {_NOW}").fetchone()
    assert row is not None
    return float(row[0])


def beat(conn: PgConnection, node_id: str, *, host: str, pid: int, holds: dict[str, object] | None = None) -> float:
    """Register the node or record its heartbeat (``started_at`` stays the first one's); the
    database's time now."""
    row = conn.execute(
        f"INSERT INTO cluster_nodes (node_id, host, pid, started_at, heartbeat_at, holds)"
        f" VALUES (%s, %s, %s, {_NOW}, {_NOW}, %s)"
        " ON CONFLICT (node_id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,"
        " heartbeat_at = EXCLUDED.heartbeat_at, holds = EXCLUDED.holds"
        " RETURNING heartbeat_at",
        (node_id, host, pid, json.dumps(holds or {}, sort_keys=True)),
    ).fetchone()
    assert row is not None
    return float(row[0])


def acquire(conn: PgConnection, kind: LeaseKind, name: str, node_id: str, *, ttl: float) -> Lease | None:
    """Take the lease for ``ttl`` seconds when it is free, expired or already ours; the lease as
    it now stands (ours, or the live holder's), None only when it vanished meanwhile.

    Ours and live: renewed, same token. Free or expired (even when it was ours): a new token, so
    work done under the old one can no longer commit (``hold_lease``). The token of a take-over
    is drawn in the UPDATE, after the row is locked: drawn before (in VALUES) a statement that
    waited on the row would hold a token smaller than one granted while it waited. That is also
    why a lease row is expired rather than deleted on release: a key's later takes go through
    that locked UPDATE (``sweep_leases`` deletes rows only long after they expired)."""
    row = conn.execute(
        "INSERT INTO cluster_leases AS l (kind, name, node_id, token, acquired_at, expires_at)"
        f" VALUES (%s, %s, %s, nextval('cluster_fence'), {_NOW}, {_NOW} + %s)"
        " ON CONFLICT (kind, name) DO UPDATE SET"
        "  token = CASE WHEN l.node_id = EXCLUDED.node_id AND l.expires_at > EXCLUDED.acquired_at"
        "          THEN l.token ELSE nextval('cluster_fence') END,"
        "  acquired_at = CASE WHEN l.node_id = EXCLUDED.node_id AND l.expires_at > EXCLUDED.acquired_at"
        "          THEN l.acquired_at ELSE EXCLUDED.acquired_at END,"
        "  node_id = EXCLUDED.node_id, expires_at = EXCLUDED.expires_at"
        " WHERE l.node_id = EXCLUDED.node_id OR l.expires_at <= EXCLUDED.acquired_at"
        " RETURNING kind, name, node_id, token, expires_at",
        (kind, name, node_id, ttl),
    ).fetchone()
    if row is not None:
        return _lease(row)
    return holder(conn, kind, name)


def holder(conn: PgConnection, kind: LeaseKind, name: str) -> Lease | None:
    """The live lease of ``name`` (None: nobody holds it now)."""
    row = conn.execute(
        "SELECT kind, name, node_id, token, expires_at FROM cluster_leases"
        f" WHERE kind = %s AND name = %s AND expires_at > {_NOW}",
        (kind, name),
    ).fetchone()
    return _lease(row) if row is not None else None


def renew_all(conn: PgConnection, node_id: str, *, ttl: float) -> list[Lease]:
    """Extend every live lease of the node; the ones it still holds (a lease missing here was
    lost: it expired, and another node may have taken it)."""
    rows = conn.execute(
        f"UPDATE cluster_leases SET expires_at = {_NOW} + %s"
        f" WHERE node_id = %s AND expires_at > {_NOW}"
        " RETURNING kind, name, node_id, token, expires_at",
        (ttl, node_id),
    ).fetchall()
    return sorted((_lease(r) for r in rows), key=lambda lease: (lease.kind, lease.name))


def hold_lease(conn: PgConnection, kind: LeaseKind, name: str, node_id: str, token: int) -> bool:
    """True when the node still holds the lease under ``token``; the row stays share-locked
    until the caller's transaction ends, so no other node takes it over meanwhile. The fence a
    caller puts first in a transaction that must only commit while it is the owner."""
    row = conn.execute(
        "SELECT 1 FROM cluster_leases WHERE kind = %s AND name = %s AND node_id = %s AND token = %s"
        f" AND expires_at > {_NOW} FOR SHARE",
        (kind, name, node_id, token),
    ).fetchone()
    return row is not None


def release(conn: PgConnection, kind: LeaseKind, name: str, node_id: str, token: int) -> bool:
    """Give a lease up (only under its own token: a late release never frees another's). The row
    stays, expired, for the next take (see ``acquire``)."""
    cur = conn.execute(
        "UPDATE cluster_leases SET expires_at = 0"
        f" WHERE kind = %s AND name = %s AND node_id = %s AND token = %s AND expires_at > {_NOW}",
        (kind, name, node_id, token),
    )
    return cur.rowcount == 1


def list_leases(conn: PgConnection, *, kind: LeaseKind | None = None, node_id: str | None = None) -> list[Lease]:
    """The live leases, by kind and name (for ``status`` and the tests)."""
    rows = conn.execute(
        "SELECT kind, name, node_id, token, expires_at FROM cluster_leases"
        f" WHERE expires_at > {_NOW} AND (%s::text IS NULL OR kind = %s) AND (%s::text IS NULL OR node_id = %s)"
        " ORDER BY kind, name",
        (kind, kind, node_id, node_id),
    ).fetchall()
    return [_lease(r) for r in rows]


def leave(conn: PgConnection, node_id: str) -> int:
    """A node that stops cleanly: its leases freed at once (others need not wait for expiry) and
    its row gone. The number of leases freed."""
    cur = conn.execute(f"UPDATE cluster_leases SET expires_at = 0 WHERE node_id = %s AND expires_at > {_NOW}", (node_id,))
    freed = cur.rowcount
    conn.execute("DELETE FROM cluster_nodes WHERE node_id = %s", (node_id,))
    return freed


def list_nodes(conn: PgConnection) -> list[NodeRow]:
    rows = conn.execute(
        f"SELECT n.node_id, n.host, n.pid, n.started_at, n.heartbeat_at, {_NOW} - n.heartbeat_at, n.holds,"
        "  COALESCE(array_agg(l.name ORDER BY l.name) FILTER (WHERE l.name IS NOT NULL), '{}')"
        " FROM cluster_nodes n LEFT JOIN cluster_leases l"
        f"  ON l.node_id = n.node_id AND l.kind = 'role' AND l.expires_at > {_NOW}"
        " GROUP BY n.node_id ORDER BY n.node_id",
    ).fetchall()
    return [
        NodeRow(
            node_id=r[0], host=r[1], pid=int(r[2]), started_at=float(r[3]), heartbeat_at=float(r[4]),
            age=max(0.0, float(r[5])), holds=_holds(r[6]), roles=tuple(r[7]),
        )
        for r in rows
    ]


def served_ledger_rows(conn: PgConnection, ledger_ids: list[int]) -> set[int]:
    """Which of these delivery-ledger rows belong to a chat whose lane a live node holds: that
    node is (or was just) sending them itself, so a recovery elsewhere must leave them alone."""
    if not ledger_ids:
        return set()
    rows = conn.execute(
        "SELECT o.id FROM gateway_outbound o JOIN cluster_leases l"
        f"  ON l.kind = 'lane' AND l.name = o.session_key AND l.expires_at > {_NOW}"
        " WHERE o.id = ANY(%s)",
        ([int(i) for i in ledger_ids],),
    ).fetchall()
    return {int(r[0]) for r in rows}


def prune_nodes(conn: PgConnection, *, silent_for: float) -> int:
    """Forget nodes not heard from for ``silent_for`` seconds (their leases expired long ago)."""
    cur = conn.execute(f"DELETE FROM cluster_nodes WHERE heartbeat_at < {_NOW} - %s", (silent_for,))
    return cur.rowcount


def sweep_leases(conn: PgConnection, *, expired_for: float = 3600.0) -> int:
    """Delete lease rows expired more than ``expired_for`` seconds ago (far longer than any
    statement may wait on a row: ``acquire``'s tokens stay monotonic)."""
    cur = conn.execute(f"DELETE FROM cluster_leases WHERE expires_at < {_NOW} - %s", (expired_for,))
    return cur.rowcount


def _lease(row: tuple[object, ...]) -> Lease:
    kind, name, node_id, token, expires_at = row[:5]
    return Lease(str(kind), str(name), str(node_id), int(token), float(expires_at))  # type: ignore[call-overload, arg-type]


def _holds(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
