"""The ids of scheduled jobs changed on any node, as migration 0010's trigger announces them.

Every INSERT, UPDATE or DELETE of ``gateway_cron_jobs`` NOTIFYs ``hermes_cron`` with the job's
id at COMMIT. A node listens on a connection of its own and reads the committed row again
(``cron.get``). A NOTIFY sent while a node was not listening is lost for it: the first item
after each LISTEN says "read them all" (the caller reloads every job).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg

from ..errors import StorageUnavailableError
from ._store import PgStore

__all__ = ["CRON_CHANNEL", "cron_wakeups"]

#: the NOTIFY channel (migration 0010); a notification's payload is the job's id
CRON_CHANNEL = "hermes_cron"


async def cron_wakeups(store: PgStore) -> AsyncIterator[str]:
    """A changed job's id for each NOTIFY, on a connection of its own. The first item is ``""``,
    once LISTEN is in place: what changed before it may have been missed, so the caller reads
    every job then. Raises ``StorageUnavailableError`` when the connection is lost (the caller
    listens again, and reads every job again)."""
    conn = await store.listen_connection()
    try:
        await conn.execute(f"LISTEN {CRON_CHANNEL}")
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
