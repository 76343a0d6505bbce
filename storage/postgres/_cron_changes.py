"""The ids of scheduled jobs changed on any node, as migration 0010's trigger announces them.

Every INSERT, UPDATE or DELETE of ``gateway_cron_jobs`` NOTIFYs ``hermes_cron`` with the job's
id at COMMIT. A node listens on a connection of its own and reads the committed row again
(``cron.get``). A NOTIFY sent while a node was not listening is lost for it: the first item
after each LISTEN says "read them all" (the caller reloads every job).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ._store import PgStore

__all__ = ["CRON_CHANNEL", "cron_wakeups"]

#: the NOTIFY channel (migration 0010); a notification's payload is the job's id
CRON_CHANNEL = "hermes_cron"


async def cron_wakeups(store: PgStore) -> AsyncIterator[str]:
    """A changed job's id for each NOTIFY (``PgStore.notifications``). The first item is ``""``,
    once LISTEN is in place: what changed before it may have been missed, so the caller reads
    every job then (and again after each reconnect)."""
    async for payload in store.notifications(CRON_CHANNEL):
        if payload is None:
            yield ""
        elif payload:
            yield payload
