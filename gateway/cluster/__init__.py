"""Several gateway nodes over one PostgreSQL database (README, "Running several nodes").

``node`` is ``ClusterNode``: this process's heartbeat, its lanes (a session key served by one
node at a time) and roles (a long-lived platform connection held by one elected node), and the
hand-off inbox's wake-ups; ``roles`` which roles a node competes for; ``_tick`` what one heartbeat and one lane claim write. The daemon
builds one when ``storage.url`` is ``postgresql://…``; a SQLite daemon has none.
"""

from gateway.cluster.node import ClusterNode, LaneClaim
from gateway.cluster.roles import LEDGER, MAINTENANCE, SCHEDULER, cluster_roles

__all__ = ["LEDGER", "MAINTENANCE", "SCHEDULER", "ClusterNode", "LaneClaim", "cluster_roles"]
