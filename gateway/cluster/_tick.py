"""What one heartbeat and one lane claim write: storage's cluster functions composed into one
transaction each (one round trip, one snapshot)."""

from __future__ import annotations

from dataclasses import dataclass, field

from storage.postgres import PgConnection
from storage.postgres import cluster as pc

#: every this many heartbeats a node also sweeps: done inbox rows, long-expired lease rows,
#: nodes silent for a day
SWEEP_EVERY = 200
DONE_INBOX_KEPT_S = 86_400.0
SILENT_NODE_FORGOTTEN_S = 86_400.0


@dataclass(frozen=True)
class TickResult:
    db_now: float
    #: every live lease this node holds after the heartbeat (renewed, taken, adopted)
    held: list[pc.Lease]
    #: the roles it wanted and another node holds: when each expires (database time)
    others: dict[str, float] = field(default_factory=dict)
    #: keys whose lane it holds with inbox rows not yet claimed under its token
    pending: list[str] = field(default_factory=list)


def heartbeat(
    conn: PgConnection,
    *,
    node_id: str,
    host: str,
    pid: int,
    holds: dict[str, object],
    ttl: float,
    roles: tuple[str, ...],
    sweep: bool,
    adopt: bool = True,
) -> TickResult:
    """Record the heartbeat, renew what the node holds, try for the roles it lacks, take over
    the lanes whose inbox rows have no live owner (``adopt``: a node that runs inbox rows), and
    say which lanes have rows waiting."""
    now = pc.beat(conn, node_id, host=host, pid=pid, holds=holds)
    held = {(le.kind, le.name): le for le in pc.renew_all(conn, node_id, ttl=ttl)}
    others: dict[str, float] = {}
    for role in roles:
        if ("role", role) in held:
            continue
        lease = pc.acquire(conn, "role", role, node_id, ttl=ttl)
        if lease is None:
            continue
        if lease.node_id == node_id:
            held[("role", role)] = lease
        else:
            others[role] = lease.expires_at
    for key in pc.orphan_keys(conn) if adopt else ():
        lease = pc.acquire(conn, "lane", key, node_id, ttl=ttl)
        if lease is not None and lease.node_id == node_id:
            held[("lane", key)] = lease
    if sweep:
        pc.sweep_inbox(conn, done_for=DONE_INBOX_KEPT_S)
        pc.sweep_leases(conn)
        pc.prune_nodes(conn, silent_for=SILENT_NODE_FORGOTTEN_S)
    return TickResult(db_now=now, held=list(held.values()), others=others, pending=pc.pending_keys(conn, node_id))


@dataclass(frozen=True)
class ClaimResult:
    lease: pc.Lease | None
    pending: bool
    db_now: float


def claim_lane(conn: PgConnection, *, key: str, node_id: str, ttl: float) -> ClaimResult:
    """Take the lane (or see who has it); whether rows wait in its inbox for this owner."""
    lease = pc.acquire(conn, "lane", key, node_id, ttl=ttl)
    pending = lease is not None and lease.node_id == node_id and key in pc.pending_keys(conn, node_id)
    return ClaimResult(lease, pending, pc.db_now(conn))
