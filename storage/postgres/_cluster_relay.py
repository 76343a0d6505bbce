"""Relayed replies' wake-ups: ``outbound.relay`` NOTIFYs at COMMIT (channel ``hermes_relay``,
payload the platform) when a node that does not hold a platform's connection leaves a reply
for the node that does. A NOTIFY can be missed (a listener reconnecting): the holder also polls
at each heartbeat."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import psycopg

from ..errors import StorageUnavailableError
from ._outbound import RELAY_CHANNEL
from ._store import PgStore


async def relay_wakeups(store: PgStore) -> AsyncGenerator[str, None]:
    """The platform of each reply relayed, on a connection of its own. The first item is ``""``
    once LISTEN is in place (what was relayed before may have been missed: take for every
    platform). Raises ``StorageUnavailableError`` when the connection is lost (listen again)."""
    conn = await store.listen_connection()
    try:
        await conn.execute(f"LISTEN {RELAY_CHANNEL}")
        yield ""
        async for note in conn.notifies():
            if note.payload:
                yield note.payload
        raise StorageUnavailableError("the database closed the listening connection")
    except psycopg.OperationalError as exc:
        raise StorageUnavailableError(f"lost the listening connection: {' '.join(str(exc).split())[:200]}") from None
    finally:
        try:
            await conn.close()
        except psycopg.Error:
            pass
