"""A cluster node in a process of its own, for the ``kill -9`` tests and the failover benchmark.

    python -m tests.gateway.cluster._node_child URL NODE_ID FAILOVER_S ROLE[,ROLE…] [LANE[,LANE…]] [PAUSE]

Prints one JSON line per event on stdout (``{"event": "acquired", "name": "telegram"}``,
``{"event": "lane", …}``, ``{"event": "ready"}``), runs its inbox rows as ``_runner`` does
(``PAUSE`` seconds before each), and runs until killed.
"""

from __future__ import annotations

import asyncio
import json
import sys

from gateway.cluster import ClusterNode
from gateway.config import ClusterConfig
from storage.postgres import PgStore
from tests.gateway.cluster._runner import InboxRunner


def say(event: str, name: str = "") -> None:
    print(json.dumps({"event": event, "name": name}), flush=True)


async def main(url: str, node_id: str, failover_s: float, roles: list[str], lanes: list[str], pause: float) -> None:
    async with PgStore(url, min_size=1, max_size=4, connect_timeout=2) as store:
        runner = InboxRunner(store, pause=pause)

        async def on_inbox(key: str) -> None:
            say("inbox", key)
            lost = runner.lost
            await runner(key)
            if runner.lost > lost:
                say("lane_lost", key)  # a turn refused by the fence: another node owns the chat

        node = ClusterNode(
            store, ClusterConfig(node_id=node_id, failover_s=failover_s), roles=roles,
            on_acquired=lambda role: say("acquired", role), on_lost=lambda role: say("lost", role),
            on_inbox=on_inbox,
        )
        runner.node = node
        await node.start()
        for lane in lanes:
            claim = await node.claim_lane(lane)
            say("lane" if claim.mine else "lane_elsewhere", lane)
        say("ready")
        await asyncio.Event().wait()


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(
        args[0], args[1], float(args[2]), [r for r in args[3].split(",") if r],
        [k for k in (args[4] if len(args) > 4 else "").split(",") if k], float(args[5]) if len(args) > 5 else 0.0,
    ))
