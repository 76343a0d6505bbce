"""/handoff on several nodes (PostgreSQL): the target platform's connection is on another node.

A long-lived connection (Telegram polling, Discord's gateway, Slack Socket Mode) is held by one
node of a cluster; the others keep that adapter in standby, unable to open a thread there or to
run the summary turn. So the node that receives ``/handoff <target>`` without the connection
(the *requester*) only inserts the ``pending`` row and waits; the node that holds the target's
role (the *holder*) claims it by compare-and-set (``take``, woken by the row's NOTIFY and polled
at each heartbeat) and runs the transfer as one daemon would: thread, binding, summary turn in
the thread's lane there. The requester hears the row end (NOTIFY, or its own poll) and answers
the source chat itself: it is the node the command came through (the HTTP API's caller waits on
it; a polling platform's message came from its connection), so it can reply there.

The pending timeout stays the requester's: a row no holder claimed in time (no node connected
to the target) is failed, and the person is told so. While a row is live, the router of every
node refuses the source chat's turns (``held`` reads the row), whichever node serves its lane.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable

import structlog

from adapters.base import ChatType, InboundMessage, OutboundMessage, SendKind
from gateway.handoff import store as rows
from gateway.handoff.job import Job
from gateway.handoff.marker import HANDOFF_DONE_PREFIX
from gateway.logs import redact
from gateway.routing.delivery import record_reply
from gateway.routing.home_channels import HomeChannel
from gateway.routing.services import Services
from storage import HandoffRow, handoffs
from storage.errors import StorageClosedError, StorageUnavailableError

log = structlog.get_logger("hermes.handoff")

_DOWN = (StorageUnavailableError, StorageClosedError, TimeoutError)


def done_text(target: str, title: str, where: str) -> str:
    return (f"{HANDOFF_DONE_PREFIX}: handed off to {target}. The session \"{title}\" now continues in {where}.\n"
            f"New messages here start a fresh session. To come back to this one, send:\n/resume {title}")


def where_text(target: str, home: HomeChannel, thread_id: str | None) -> str:
    return f"a new thread of the {target} home channel" if thread_id != home.thread_id \
        else f"the {target} home channel"


def failed_text(reason: str, target: str) -> str:
    return f"Handoff failed: {reason}.\nYour session here is intact; try /handoff {target} again."


def unclaimed_reason(target: str) -> str:
    """What the pending timeout says on a cluster: no node connected to the target took it."""
    return f"no gateway node connected to {target} picked it up in time (is {target} connected?)"


class ClusterHandoffs:
    """The two sides of a handoff between nodes; ``HandoffRunner`` is built on it. Off (one
    daemon, SQLite) while ``served_elsewhere`` is None."""

    _services: Services
    _holding: dict[str, str]
    _timers: dict[int, asyncio.TimerHandle]
    _closed: bool

    def _init_cluster(self) -> None:
        #: several nodes: whether ``target``'s connection is another node's (set by the daemon's
        #: ``ClusterDuties``); then this node leaves the row to that node
        self.served_elsewhere: Callable[[str], bool] | None = None
        #: several nodes: how often a waiting requester reads its row again (a NOTIFY missed)
        self.poll_every = 1.0
        #: several nodes: whether another node serves this key's lane now (a reply being written there)
        self.lane_elsewhere: Callable[[str], Awaitable[bool]] | None = None
        self._woken: dict[int, asyncio.Event] = {}
        #: rows this node runs itself (its own requests): never taken as another's
        self._local: set[int] = set()
        self._taken: set[int] = set()

    # -- both sides -----------------------------------------------------------------------

    async def held(self, source_key: str) -> str | None:
        """The platform this key's session is being handed off to, if any: this node's own
        handoffs, and on a cluster any node's (the row)."""
        here = self._holding.get(source_key)
        if here is not None or self.served_elsewhere is None:
            return here
        try:
            return await self._services.store.read(lambda c: handoffs.live_target(c, source_key))
        except _DOWN:
            return None  # the turn runs into its own storage error

    def woken(self, handoff_id: int) -> None:
        """A row's state changed (its NOTIFY): the requester waiting on it reads it now."""
        event = self._woken.get(handoff_id)
        if event is not None:
            event.set()

    def remote(self, target: str) -> bool:
        return self.served_elsewhere is not None and self.served_elsewhere(target)

    # -- the requester --------------------------------------------------------------------

    async def _await_remote(self, job: Job) -> None:
        """Wait for the holder to finish the row (or the timeout to fail it), then tell the source."""
        with structlog.contextvars.bound_contextvars(handoff_id=job.handoff_id, session_id=job.session_id,
                                                     session_key=job.source_key):
            event = self._woken.setdefault(job.handoff_id, asyncio.Event())
            try:
                row = await self._settled_row(job.handoff_id, event)
            except asyncio.CancelledError:
                # stopping: a row nobody claimed yet is failed (the holder may not start it now)
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._services.store.write(lambda c: rows.fail_if_pending(
                        c, job.handoff_id, "the gateway node that took the /handoff stopped")))
                raise
            finally:
                self._woken.pop(job.handoff_id, None)
                timer = self._timers.pop(job.handoff_id, None)
                if timer is not None:
                    timer.cancel()
                if self._holding.get(job.source_key) == job.target:
                    del self._holding[job.source_key]
            if row is None:
                return
            if row.state == rows.COMPLETED:
                title = await self._title_of(job.session_id)
                log.info("handoff.completed_elsewhere", target=job.target, target_key=row.target_key)
                text = done_text(job.target, title,
                                 where_text(job.target, job.home, row.target_thread_id))
            else:
                log.warning("handoff.failed_elsewhere", reason=row.error)
                text = failed_text(row.error or "it failed on the node connected to " + job.target, job.target)
            await self._tell_source_from_here(job, text)

    async def _tell_source_from_here(self, job: Job, text: str) -> None:
        """The outcome, sent by this node (the command came through it). Should this node have lost
        the source platform's connection meanwhile (its role moved), the reply goes into the
        delivery ledger instead, which the node connected to that platform sends
        (``ClusterDuties._recover_ledger``: a row of no served chat, marked as recovered)."""
        src = job.source
        out = OutboundMessage(src.platform, src.chat_id, redact(text), src.thread_id, src.message_id, SendKind.NOTICE)
        delivery = self._services.delivery
        try:
            sent = await delivery.send(out)
        except Exception:
            sent = False
        if sent or not self.remote(src.platform) or not delivery.recoverable(src.platform):
            return
        log.warning("handoff.reply_left_to_the_connected_node", platform=src.platform)
        reply = dataclasses.replace(out, kind=SendKind.REPLY)
        with contextlib.suppress(Exception):
            await self._services.store.write(lambda c: record_reply(c, reply, None, None))

    async def _settled_row(self, handoff_id: int, event: asyncio.Event) -> HandoffRow | None:
        while True:
            event.clear()  # before the read: a NOTIFY during it asks for another one
            try:
                row = await self._services.store.read(lambda c: rows.get(c, handoff_id))
            except _DOWN:
                row = None
            else:
                if row is None or row.state in (rows.COMPLETED, rows.FAILED):
                    return row
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), self.poll_every)

    async def _title_of(self, session_id: str) -> str:
        session = await self._services.store.get_session(session_id) or {}
        return str(session.get("title") or session_id)

    # -- the holder -----------------------------------------------------------------------

    async def take(self, target: str) -> int:
        """Claim and run the rows left ``pending`` for ``target`` by other nodes (this node holds
        its connection now); how many were started. Each is claimed by compare-and-set, so of
        two nodes that try one row only one runs it."""
        if self._closed:
            return 0
        found = await self._services.store.read(lambda c: handoffs.pending_for(c, target))
        started = 0
        for row in found:
            if row.id in self._local or row.id in self._taken:
                continue
            self._taken.add(row.id)
            self._spawn(self._run_taken(row), f"handoff:{row.id}")
            started += 1
        return started

    async def _run_taken(self, row: HandoffRow) -> None:
        try:
            home = await self._services.home_channels.get(row.target_platform)
            if home is None:
                await self._services.store.write(lambda c: rows.fail_if_pending(
                    c, row.id, f"{row.target_platform} has no home channel any more"))
                return
            # The requester tells the source chat: this node only moves the session (``tell``
            # False), so the source is known here by its platform alone (the summary names it).
            source = InboundMessage(platform=row.source_platform, chat_id="", chat_type=ChatType.DM,
                                    user_id=None, text="")
            job = Job(row.id, row.session_id, source, row.source_key, row.target_platform, home, tell=False)
            log.info("handoff.taken", handoff_id=row.id, target=row.target_platform)
            await self._run(job)
        finally:
            self._taken.discard(row.id)

    # -- what HandoffRunner defines ---------------------------------------------------------

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        raise NotImplementedError

    async def _run(self, job: Job) -> None:
        raise NotImplementedError

