"""/handoff's wake-ups between nodes: migration 0011's trigger NOTIFYs at COMMIT of every new
handoff row and every change of its state, so the node connected to the target platform hears
of a ``pending`` row (and claims it), and the node that waits to tell the source chat hears of
its row's end. A NOTIFY can be missed (a listener reconnecting): both sides also poll."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

import psycopg

from ..errors import StorageUnavailableError
from ._store import PgStore

#: the NOTIFY channel; a notification's payload is ``"<target platform>\t<id>\t<state>"``
HANDOFF_CHANNEL = "hermes_handoff"


@dataclass(frozen=True)
class HandoffNote:
    """One row's news; ``handoff_id`` 0 is the first item, once LISTEN is in place (poll then)."""

    target: str
    handoff_id: int
    state: str


async def handoff_wakeups(store: PgStore) -> AsyncGenerator[HandoffNote, None]:
    """A ``HandoffNote`` for each handoff row inserted or moved, on a connection of its own. The
    first is ``HandoffNote("", 0, "")``: what changed before LISTEN may have been missed. Raises
    ``StorageUnavailableError`` when the connection is lost (the caller listens again, and polls)."""
    conn = await store.listen_connection()
    try:
        await conn.execute(f"LISTEN {HANDOFF_CHANNEL}")
        yield HandoffNote("", 0, "")
        async for note in conn.notifies():
            target, _, rest = note.payload.partition("\t")
            handoff_id, _, state = rest.partition("\t")
            if handoff_id.isdigit():
                yield HandoffNote(target, int(handoff_id), state)
        raise StorageUnavailableError("the database closed the listening connection")
    except psycopg.OperationalError as exc:
        raise StorageUnavailableError(f"lost the listening connection: {' '.join(str(exc).split())[:200]}") from None
    finally:
        try:
            await conn.close()
        except psycopg.Error:
            pass
