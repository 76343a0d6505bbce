"""Relayed replies' wake-ups: ``outbound.relay`` NOTIFYs at COMMIT (channel ``hermes_relay``,
payload the platform) when a node that does not hold a platform's connection leaves a reply
for the node that does. A NOTIFY can be missed (a listener reconnecting): the holder also polls
at each heartbeat."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from ._outbound import RELAY_CHANNEL
from ._store import PgStore


async def relay_wakeups(store: PgStore) -> AsyncGenerator[str, None]:
    """The platform of each reply relayed (``PgStore.notifications``). The first item is ``""``
    once LISTEN is in place (what was relayed before may have been missed: take for every
    platform)."""
    async for payload in store.notifications(RELAY_CHANNEL):
        if payload is None:
            yield ""
        elif payload:
            yield payload
