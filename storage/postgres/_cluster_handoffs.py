"""/handoff's wake-ups between nodes: migration 0011's trigger NOTIFYs at COMMIT of every new
handoff row and every change of its state, so the node connected to the target platform hears
of a ``pending`` row (and claims it), and the node that waits to tell the source chat hears of
its row's end. A NOTIFY can be missed (a listener reconnecting): both sides also poll."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

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
    """A ``HandoffNote`` for each handoff row inserted or moved (``PgStore.notifications``). The
    first is ``HandoffNote("", 0, "")``, once LISTEN is in place: the caller polls then."""
    async for payload in store.notifications(HANDOFF_CHANNEL):
        if payload is None:
            yield HandoffNote("", 0, "")
            continue
        target, _, rest = payload.partition("\t")
        handoff_id, _, state = rest.partition("\t")
        if handoff_id.isdigit():
            yield HandoffNote(target, int(handoff_id), state)
