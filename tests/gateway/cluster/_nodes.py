"""Helpers of the cluster tests: nodes started in this process, their events, waiting."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack

from gateway.cluster import ClusterNode
from gateway.config import ClusterConfig
from storage.postgres import PgStore
from tests.gateway.cluster._runner import InboxRunner

ROLES = ("telegram", "discord:0", "discord:1", "slack", "scheduler")


async def until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Wait for ``check()``; the timeout only guards against a hang (it is no assertion of speed)."""
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)
    assert check(), what


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, str, str]] = []

    def recorder(self, node: str, event: str) -> Callable[[str], None]:
        return lambda name: self.items.append((node, event, name))


async def start_node(
    stack: AsyncExitStack, url: str, node_id: str, events: Events, *, failover_s: float = 3.0,
    roles: tuple[str, ...] = ROLES, runner: bool = False,
) -> tuple[ClusterNode, PgStore]:
    store = await stack.enter_async_context(PgStore(url, min_size=1, max_size=6, connect_timeout=2))
    inbox = InboxRunner(store) if runner else None
    node = ClusterNode(
        store, ClusterConfig(node_id=node_id, failover_s=failover_s), roles=roles,
        on_acquired=events.recorder(node_id, "acquired"), on_lost=events.recorder(node_id, "lost"),
        on_inbox=inbox,
    )
    if inbox is not None:
        inbox.node = node
    await node.start()
    stack.push_async_callback(node.stop)
    return node, store


def holders(nodes: list[ClusterNode], role: str) -> list[str]:
    return [n.node_id for n in nodes if n.holds_role(role)]
