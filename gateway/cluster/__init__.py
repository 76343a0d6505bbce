"""Several gateway nodes over one PostgreSQL database (README, "Running several nodes").

``node`` is ``ClusterNode``: this process's heartbeat, its lanes (a session key served by one
node at a time) and roles (a long-lived platform connection held by one elected node), and the
hand-off inbox's wake-ups; ``roles`` which roles a node competes for; ``_tick`` what one heartbeat and one lane claim write. The daemon
builds one when ``storage.url`` is ``postgresql://…``; a SQLite daemon has none.

How the daemon uses it: ``ClusterNode(store, settings.cluster, roles=cluster_roles(settings),
on_acquired=start that poller/loop, on_lost=stop it, on_inbox=run the key's inbox)``, then
``start()`` (after the store opened) and ``stop()`` (before it closes). For a message:
``claim = await node.claim_lane(key)``; ``claim.mine``: run it in the key's lane (its inbox
first when ``claim.pending``), putting ``hold_lease(conn, "lane", key, node_id, claim.token)``
in the turn's write (False: roll back); otherwise write ``node.hand_off(key, payload,
claim.owner)`` in the transaction of its inbound dedupe row. ``on_inbox(key)``: ``take_inbox``
and run each row in order, ``finish_inbox`` in the transaction that stores its answer (False:
roll back). ``release_lane(key)`` once a lane is empty; ``snapshot()`` and
``storage.postgres.cluster.list_nodes`` for ``status`` (``cluster_view``).
"""

from gateway.cluster.node import ClusterNode, LaneClaim
from gateway.cluster.roles import LEDGER, MAINTENANCE, SCHEDULER, cluster_roles
from gateway.cluster.view import cluster_view

__all__ = ["LEDGER", "MAINTENANCE", "SCHEDULER", "ClusterNode", "LaneClaim", "cluster_roles", "cluster_view"]
