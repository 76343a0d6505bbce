"""Replies relayed between nodes (README, "Running several nodes").

A turn may run on a node that does not hold its platform's long-lived connection (Telegram
polling, Discord's gateway, Slack Socket Mode): the chat's lane is this node's, or it holds the
scheduler role, or runs a /bg task. Its adapter is in standby there and cannot send, so
``Delivery`` leaves each message in the delivery ledger marked ``relay`` (``relays`` says when);
the node holding the connection sends those rows when the NOTIFY of their commit wakes it, at
each heartbeat (a NOTIFY missed), and as soon as it is connected after taking the role.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

import structlog

from adapters.base import Adapter
from gateway.cluster import ClusterNode
from gateway.routing import Delivery
from storage.errors import StorageClosedError, StorageUnavailableError
from storage.postgres import cluster as pc

log = structlog.get_logger("hermes.cluster")

_DOWN = (StorageUnavailableError, StorageClosedError, TimeoutError)


class Relays:
    """Both ends of relaying on this node: what it hands over, and what it sends for the others."""

    def __init__(self, node: ClusterNode, adapters: Mapping[str, Adapter], delivery: Delivery) -> None:
        self._node = node
        self._adapters = adapters
        self._delivery = delivery
        #: the adapters whose connection is a role (one node at a time holds it)
        self._roles = frozenset(name for name in adapters if name in node.roles)
        #: per adapter role held here: set when a relayed row for it may wait (its NOTIFY)
        self._wake: dict[str, asyncio.Event] = {}
        self._listener: asyncio.Task[None] | None = None

    def relays(self, platform: str) -> bool:
        """``Delivery.relays``: the platform's connection is a role this node does not hold now."""
        return platform in self._roles and not self._node.holds_role(platform)

    def start(self) -> None:
        self._listener = asyncio.create_task(self._listen(), name="cluster-relay-listen")

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)

    async def serve(self, role: str) -> None:
        """While this node holds ``role``: send what other nodes relayed to it, once connected,
        then at each NOTIFY and each heartbeat."""
        wake = self._wake.setdefault(role, asyncio.Event())
        adapter = self._adapters[role]
        try:
            while True:
                wake.clear()  # before the take: a NOTIFY during it asks for another one
                if adapter.ready.is_set():
                    try:
                        if sent := await self._delivery.send_relayed(role):
                            log.info("cluster.relayed_sent", role=role, sent=sent)
                    except _DOWN:
                        pass
                    except Exception:
                        log.exception("cluster.relay_send_failed", role=role)
                # not connected yet: the moment it is, what waits goes out
                event = wake if adapter.ready.is_set() else adapter.ready
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), self._node.config.heartbeat)
        finally:
            self._wake.pop(role, None)

    async def _listen(self) -> None:
        backoff = 0.2
        while True:
            try:
                async for platform in pc.relay_wakeups(self._node.store):
                    backoff = 0.2
                    for role, wake in self._wake.items():
                        if not platform or role == platform:
                            wake.set()
            except _DOWN:
                pass
            except Exception:
                log.exception("cluster.relay_listen_failed")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._node.config.heartbeat)
