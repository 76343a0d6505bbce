"""Parked messages: a message taken from its platform is kept in state.db until it is answered.

The router tells a platform it took a message (``Disposition.ACCEPTED``: Telegram's offset moves
past it, Slack and Discord never send it again) once the message waits in its chat's lane, which
is memory. So before that, the message is *parked* (``storage.inbound.park``), and the row goes:

- in the transaction that stores the turn's answer (``ParkTicket.settle_op``), or
- once the message was answered otherwise: a command's reply, an error notice, a /stop
  (``Parking.settle``).

A stop's drain leaves the rows of the messages it cut off, and a crash leaves whatever was
parked. At the next start, before any platform connects, the router takes each left row again
in order (``Router.replay``): a message whose question is stored is answered from it (its turn
resumed), the others run as they would have. On several nodes (PostgreSQL) a parked message is a
row of the hand-off inbox claimed by its lane's holder: the chat's next owner runs it.

Only what a platform would not bring again is parked: not a request whose caller waits for its
answer (an HTTP request: the caller retries), not the terminal's lines.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from typing import Any

import structlog

from adapters.base import Adapter, ChatType, Disposition, InboundMessage
from adapters.media import Attachment, AttachmentKind
from gateway.errors import LaneLostError
from gateway.routing.delivery import READY_WAIT
from gateway.routing.lanes import Job, Lanes
from gateway.routing.outbox import fenced
from storage import Store, inbound

log = structlog.get_logger("hermes.router")

__all__ = ["ParkTicket", "Parking", "from_payload", "to_payload"]

#: every field but the ones written apart (its chat type, its files) and the platform's own object
_FIELDS = tuple(f.name for f in fields(InboundMessage) if f.name not in ("chat_type", "attachments", "raw"))
_FILE_FIELDS = tuple(f.name for f in fields(Attachment) if f.name not in ("kind", "data"))

Fence = Callable[[Any], bool]


def _unfenced(conn: Any) -> bool:
    """One node: a settle needs no lane check."""
    return True


def to_payload(msg: InboundMessage) -> str:
    """``msg`` as JSON, to be run again by another process (the platform's own object is not kept:
    an attachment is its platform handle, fetched when its turn runs)."""
    files = [{"kind": str(a.kind), **{name: getattr(a, name) for name in _FILE_FIELDS},
              "data": base64.b64encode(a.data).decode("ascii") if a.data is not None else None}
             for a in msg.attachments]
    return json.dumps({"chat_type": str(msg.chat_type), "attachments": files,
                       **{name: getattr(msg, name) for name in _FIELDS}})


def from_payload(payload: str) -> InboundMessage:
    """The message ``to_payload`` wrote. Raises ValueError (or KeyError, TypeError) on a payload
    that is not one. A payload of an older release lacks ``platform_retries``, ``awaits_answer`` and
    ``attachments``."""
    data: dict[str, Any] = json.loads(payload)
    files = tuple(
        Attachment(kind=AttachmentKind(f["kind"]), data=base64.b64decode(f["data"]) if f.get("data") else None,
                   **{name: f.get(name) for name in _FILE_FIELDS})
        for f in data.get("attachments", ())
    )
    values = {name: data[name] for name in _FIELDS if name in data}
    return InboundMessage(chat_type=ChatType(data["chat_type"]), attachments=files, **values)


@dataclass
class ParkTicket:
    """One parked message on its way: its row, and whether that row is gone."""

    id: int
    #: taken again at a start (its chat's platform may still be connecting)
    replayed: bool = False
    settled: bool = False

    def settle_op(self) -> Callable[[sqlite3.Connection], None]:
        """The row goes with the write this joins (a turn's answer)."""
        def op(conn: sqlite3.Connection) -> None:
            inbound.unpark(conn, self.id)
            self.settled = True

        return op


class Parking:
    def __init__(self, store: Store, lanes: Lanes, adapters: dict[str, Adapter]) -> None:
        self._store = store
        self._lanes = lanes
        self._adapters = adapters
        #: bookkeeping after a job, off its lane's path (the chat's next message does not wait for it)
        self._later: set[asyncio.Future[None]] = set()

    def later(self, work: Awaitable[None]) -> None:
        """Run ``work`` (a write that must not hold the lane) beside the lane; its failure is its own
        to log. It reaches the one writer at the loop's next pass, ahead of the lane's next job."""
        task = asyncio.ensure_future(work)
        self._later.add(task)
        task.add_done_callback(self._later.discard)

    async def aclose(self) -> None:
        """Wait for the bookkeeping still being written (before the store closes): a row left
        behind would run its command again at the next start."""
        if self._later:
            await asyncio.wait(set(self._later), timeout=10.0)

    @staticmethod
    def wanted(msg: InboundMessage) -> bool:
        """Whether ``msg`` is parked: its platform will not bring it again once it was taken."""
        return msg.redeliverable and not msg.awaits_answer

    async def park(self, msg: InboundMessage, key: str) -> ParkTicket | None:
        """Keep ``msg`` until it is answered; None where it cannot be kept for another node to take
        (several nodes, and this one does not hold the chat's lane: it fails on its own then)."""
        holder: tuple[str, int] | None = None
        gate = self._lanes.gate
        if gate is not None:
            holder = gate.holder(key)
            if holder is None:
                return None
        node_id, token = holder if holder is not None else (None, None)
        payload, now = to_payload(msg), time.time()
        park_id = await self._store.write(lambda c: inbound.park(
            c, key, msg.platform, msg.user_id, payload, now=now, node_id=node_id, token=token))
        return ParkTicket(park_id)

    async def settle(self, ticket: ParkTicket | None) -> None:
        """The message was answered before it reached a lane (a notice, an unreadable row): its row
        goes. A failure is logged: the row is then taken again at the next start."""
        if ticket is not None and not ticket.settled:
            await self._write(ticket, ticket.settle_op())

    def _fence(self, key: str) -> Fence | None:
        """On several nodes, the check that this node still holds ``key``'s lane under its token
        now (None: it does not hold it); ``_unfenced`` on one node."""
        gate = self._lanes.gate
        return _unfenced if gate is None else gate.fence(key)

    @staticmethod
    def _settle_op(ticket: ParkTicket, fence: Fence | None) -> Callable[..., None] | None:
        """The row's settle, fenced with the lane's token its job ran under: a job whose lane was
        lost meanwhile (the database away past the lease) answered nothing the new owner will not
        answer, and the row is the new owner's, even when that is this node again."""
        if fence is None:
            log.info("router.parked_left_to_new_owner", park_id=ticket.id)
            return None
        op: Callable[..., None] | None = ticket.settle_op()
        return op if fence is _unfenced else fenced(fence, op)

    async def _write(self, ticket: ParkTicket, op: Callable[..., None] | None) -> None:
        if op is None:
            return
        try:
            await self._store.write(op)
        except LaneLostError:
            log.info("router.parked_left_to_new_owner", park_id=ticket.id)
        except Exception as exc:
            log.warning("router.parked_unsettled", park_id=ticket.id, error=f"{type(exc).__name__}: {exc}")

    def job(self, ticket: ParkTicket, job: Job, platform: str, key: str, *, stopping: Callable[[], bool]) -> Job:
        """``job`` (the message's turn or command), settling its row when it ends. A job the
        gateway's stop cut off (``stopping()``) leaves its row: the next start takes it again.
        Taken again at a start, it first waits (up to ``READY_WAIT``) for its platform to connect."""
        async def run() -> None:
            fence = self._fence(key)  # the lane is this node's now (``LaneGate.enter``)
            adapter = self._adapters.get(platform)
            if ticket.replayed and adapter is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(adapter.ready.wait(), READY_WAIT)
            try:
                await job()
            except asyncio.CancelledError:
                if not stopping() and not ticket.settled:  # /stop: its note answered it
                    await asyncio.shield(self._write(ticket, self._settle_op(ticket, fence)))
                raise
            except BaseException:
                if not ticket.settled:  # it crashed (logged by its lane): taking it again would too
                    self.later(self._write(ticket, self._settle_op(ticket, fence)))
                raise
            if not ticket.settled:  # a turn's answer took it; a command, a notice, a /stop did not
                self.later(self._write(ticket, self._settle_op(ticket, fence)))

        return run

    async def unanswered(self, ticket: ParkTicket) -> bool:
        """Whether the message's row still waits (no copy of it was answered meanwhile)."""
        return await self._store.read(lambda c: inbound.is_parked(c, ticket.id))

    async def replay(self, handle: Callable[[InboundMessage, ParkTicket], Awaitable[Disposition]]) -> int:
        """Each row a crash or a stop left, oldest first, through ``handle`` (the router's) again;
        how many went into a lane. A row whose platform this process does not serve (a terminal
        chat's gateway) waits for one that does; one that cannot be read is dropped (logged)."""
        taken = 0
        for row in await self._store.read(inbound.parked):
            ticket = ParkTicket(row.id, replayed=True)
            try:
                msg = from_payload(row.payload)
            except (ValueError, TypeError, KeyError):
                log.error("router.parked_unreadable", park_id=row.id)
                await self.settle(ticket)
                continue
            if msg.platform not in self._adapters:
                continue
            disposition = await handle(msg, ticket)
            log.info("router.parked_replayed", park_id=row.id, disposition=str(disposition))
            if disposition is Disposition.ACCEPTED:
                taken += 1
            elif disposition is not Disposition.DEFERRED:  # answered, refused, seen: done with it
                await self.settle(ticket)
        return taken
