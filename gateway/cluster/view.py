"""What ``status`` shows of the cluster: every node the database knows, and this one."""

from __future__ import annotations

from typing import Any

import structlog

from gateway.cluster.node import ClusterNode
from storage.errors import StorageClosedError, StorageUnavailableError
from storage.postgres import cluster as pc

log = structlog.get_logger("hermes.cluster")


async def cluster_view(node: ClusterNode, last: dict[str, Any]) -> dict[str, Any]:
    """The view now; with the database away, ``last`` with this node's own state and why."""
    try:
        nodes = await node.store.read(pc.list_nodes)
    except (StorageUnavailableError, StorageClosedError, TimeoutError) as exc:
        return {**last, "this_node": node.snapshot(), "database": f"away: {type(exc).__name__}"}
    except Exception:
        log.exception("cluster.view_failed")
        return last
    ttl = node.config.failover_s
    return {
        "node_id": node.node_id,
        "this_node": node.snapshot(),
        "database": "up",
        "nodes": [
            {"node_id": n.node_id, "host": n.host, "pid": n.pid, "alive": n.age < ttl,
             "heartbeat_age_s": round(n.age, 1), "roles": list(n.roles), "lanes": n.holds.get("lanes", 0)}
            for n in nodes
        ],
    }
