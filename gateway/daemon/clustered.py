"""The daemon as one node of several over one PostgreSQL database (README, "Running several nodes").

Built only when the store is PostgreSQL; a SQLite daemon has none of this. It runs a
``ClusterNode`` and does what the node's leases say:

- roles: a long-lived platform connection (Telegram polling, Discord's gateway, Slack Socket
  Mode) is supervised only while this node holds its role, and disconnected when it loses it;
  the scheduler, the delivery ledger's recovery and the periodic sweeps likewise. Webhook
  platforms and the HTTP API run on every node.
- lanes: a key's jobs run here only while this node holds the key's lane (``LaneGate``); a
  node that finds another live node serving the key waits until that node lets it go (its lane
  ran dry) or dies (its lease expires). The lane is let go once it ran dry here.
- handoffs: a ``/handoff`` to a platform whose connection another node holds is left ``pending``
  for that node, which claims it when the row's NOTIFY (or its poll each heartbeat) says so
  (``gateway.handoff.remote``).
- relays: a reply sent on a platform whose connection another node holds is left in the
  delivery ledger for that node (``gateway.daemon.relay``).
- ``view``: the nodes, what each holds, and the database's health, for ``status``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import structlog

from adapters.base import Adapter, Disposition, InboundMessage
from gateway.cluster import LEDGER, MAINTENANCE, SCHEDULER, ClusterNode, cluster_roles, cluster_view
from gateway.config import LoadedConfig
from gateway.daemon.build import Runtime
from gateway.daemon.cron_sync import CronSync
from gateway.daemon.relay import Relays
from gateway.routing.parking import ParkTicket, from_payload, to_payload
from gateway.scheduler import jobs_of
from storage.errors import StorageClosedError, StorageUnavailableError
from storage.postgres import PgStore
from storage.postgres import cluster as pc

log = structlog.get_logger("hermes.cluster")

#: the inbox row being run (``handed_off`` lets it through: it is in its turn already)
_RUNNING: ContextVar[InboundMessage | None] = ContextVar("hermes_inbox_running", default=None)

_DOWN = (StorageUnavailableError, StorageClosedError, TimeoutError)
#: how long a role's connection gets to close when the role is lost
DISCONNECT_GRACE = 10.0


@dataclass
class _InboxTurn:
    """One run of a chat's inbox at a time (the dispatcher's, or a direct message's before it)."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class ClusterDuties:
    """What this node runs because of the leases it holds."""

    def __init__(
        self,
        config: LoadedConfig,
        store: PgStore,
        runtime: Runtime,
        adapters: dict[str, Adapter],
        *,
        supervise: Callable[[str], Awaitable[None]],
        standby: Callable[[str], None],
        sweeper: Callable[[], Awaitable[None]],
    ) -> None:
        self._config = config
        self._runtime = runtime
        self._adapters = adapters
        self._supervise = supervise
        self._standby = standby
        self._sweeper = sweeper
        cluster = config.settings.cluster
        self.node = ClusterNode(store, cluster, roles=cluster_roles(config.settings),
                                on_acquired=self._acquired, on_lost=self._lost, on_inbox=self._run_inbox)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._releasing: dict[str, asyncio.Task[None]] = {}
        self._inbox_turns: dict[str, _InboxTurn] = {}
        self._view_task: asyncio.Task[None] | None = None
        self._handoff_task: asyncio.Task[None] | None = None
        #: per adapter role held: set when a handoff for it may wait (its NOTIFY)
        self._handoff_wake: dict[str, asyncio.Event] = {}
        self._stopped = False
        #: the daemon stops taking work: handed messages stay in the inbox for another node
        self.stopping = False
        self.view: dict[str, Any] = {"node_id": self.node.node_id, "nodes": [], "database": "unknown"}
        delivery = runtime.services.delivery
        delivery.served_elsewhere = pc.served_ledger_rows
        delivery.recovery_grace = cluster.failover_s
        #: replies sent on a platform another node is connected to go through that node
        self.relays = Relays(self.node, adapters, delivery)
        delivery.relays = self.relays.relays
        runtime.services.lanes.gate = self
        jobs = jobs_of(runtime.services)
        #: the jobs as the database has them, whichever node changed or ran one
        self.cron_sync = CronSync(store, jobs, retry_max=cluster.heartbeat) if jobs is not None else None
        runtime.handoffs.served_elsewhere = self._served_elsewhere
        runtime.handoffs.poll_every = cluster.heartbeat
        runtime.handoffs.lane_elsewhere = self._lane_elsewhere

    @property
    def adapter_roles(self) -> frozenset[str]:
        """The adapters this node runs only while it holds their role."""
        return frozenset(name for name in self._adapters if name in self.node.roles)

    async def others_alive(self) -> bool:
        """Whether another node heartbeats now (then what is pending in the database may be its work)."""
        nodes = await self.node.store.read(pc.list_nodes)
        return any(n.node_id != self.node.node_id and n.age < self.node.config.failover_s for n in nodes)

    async def start(self) -> None:
        if self.cron_sync is not None:
            self.cron_sync.start()
        self.relays.start()
        await self.node.start()
        self._view_task = asyncio.create_task(self._every_heartbeat(), name="cluster-view")
        self._handoff_task = asyncio.create_task(self._listen_handoffs(), name="cluster-handoffs")

    async def stop(self) -> None:
        """Let every role go (its connection closed, its loop stopped), then leave the cluster."""
        if self._stopped:
            return
        self._stopped = True
        for loop in (self._view_task, self._handoff_task):
            if loop is not None:
                loop.cancel()
                await asyncio.gather(loop, return_exceptions=True)
        await self.node.stop()  # on_lost for each role held, run before it returns
        await self.relays.stop()
        if self.cron_sync is not None:
            await self.cron_sync.stop()
        for task in [*self._tasks.values(), *self._releasing.values()]:
            task.cancel()
        await asyncio.gather(*self._tasks.values(), *self._releasing.values(), return_exceptions=True)

    # -- roles ------------------------------------------------------------------------------

    async def _acquired(self, role: str) -> None:
        log.info("cluster.role_acquired", role=role)
        if role in self.adapter_roles:
            # the connection, the recovery of its platform's replies and those other nodes relayed:
            # only a connected node can send them
            self._spawn(role, asyncio.gather(self._supervise(role), self._recover_ledger((role,)),
                                             self._take_handoffs(role), self.relays.serve(role)))
        elif role == SCHEDULER and self._runtime.scheduler is not None:
            await self._runtime.scheduler.start()
        elif role == LEDGER:  # the platforms every node connects to (webhooks, the HTTP API)
            self._spawn(role, self._recover_ledger(tuple(n for n in self._adapters if n not in self.adapter_roles)))
        elif role == MAINTENANCE:
            self._spawn(role, self._sweeper())

    async def _lost(self, role: str) -> None:
        log.warning("cluster.role_lost", role=role)
        task = self._tasks.pop(role, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if role in self.adapter_roles:
            # another node connects now: this one lets go of the platform (one poller at a time)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._adapters[role].disconnect(), DISCONNECT_GRACE)
            self._standby(role)
        elif role == SCHEDULER and self._runtime.scheduler is not None:
            await self._runtime.scheduler.stop()

    def _spawn(self, role: str, work: Awaitable[object]) -> None:
        async def run() -> None:
            await work

        self._tasks[role] = asyncio.create_task(run(), name=f"role:{role}")

    async def _recover_ledger(self, platforms: tuple[str, ...]) -> None:
        """Send what a node that died left unsent on these platforms, whenever it died: each
        heartbeat, the rows of chats no live node serves (``Delivery.served_elsewhere``)."""
        delivery = self._runtime.services.delivery
        minutes = self._config.settings.gateway.delivery_recovery_minutes
        while True:
            for name in platforms:
                if not self._adapters[name].ready.is_set():
                    continue  # not connected here (or held by another node): its rows wait
                try:
                    sent = await delivery.recover(name, minutes * 60)
                    if sent:
                        log.info("cluster.ledger_recovered", adapter=name, sent=sent)
                except _DOWN:
                    pass
                except Exception:
                    log.exception("delivery.recovery_failed", adapter=name)
            await asyncio.sleep(self.node.config.heartbeat)

    # -- handoffs ---------------------------------------------------------------------------

    def _served_elsewhere(self, target: str) -> bool:
        """A handoff to ``target`` is for another node: its connection is a role this node
        is not connected to (held elsewhere, or by nobody yet)."""
        return target in self.adapter_roles and not self._adapters[target].ready.is_set()

    async def _lane_elsewhere(self, key: str) -> bool:
        """Whether another live node serves ``key`` now (its lane is busy there)."""
        try:
            lease = await self.node.store.read(partial(pc.holder, kind="lane", name=key))
        except _DOWN:
            return False
        return lease is not None and lease.node_id != self.node.node_id

    async def _take_handoffs(self, role: str) -> None:
        """While this node holds ``role``: the handoffs to it other nodes left pending, when
        their NOTIFY says so and at each heartbeat (a NOTIFY missed), once connected."""
        wake = self._handoff_wake.setdefault(role, asyncio.Event())
        adapter, handoffs = self._adapters[role], self._runtime.handoffs
        try:
            while True:
                wake.clear()  # before the poll: a NOTIFY during it asks for another one
                if adapter.ready.is_set():
                    try:
                        if taken := await handoffs.take(role):
                            log.info("cluster.handoffs_taken", role=role, count=taken)
                    except _DOWN:
                        pass
                    except Exception:
                        log.exception("cluster.handoffs_take_failed", role=role)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), self.node.config.heartbeat)
        finally:
            self._handoff_wake.pop(role, None)

    async def _listen_handoffs(self) -> None:
        backoff = 0.2
        while True:
            try:
                async for note in pc.handoff_wakeups(self.node.store):
                    backoff = 0.2
                    if note.state == "pending" or not note.handoff_id:
                        for role, wake in self._handoff_wake.items():
                            if not note.target or role == note.target:
                                wake.set()
                    else:
                        self._runtime.handoffs.woken(note.handoff_id)
            except _DOWN:
                pass
            except Exception:
                log.exception("cluster.handoff_listen_failed")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.node.config.heartbeat)

    # -- lanes (the Lanes' gate) ------------------------------------------------------------

    async def enter(self, key: str) -> None:
        """Wait until this node serves ``key``: a lane another live node holds is waited for."""
        backoff = 0.05
        while True:
            releasing = self._releasing.get(key)
            if releasing is not None:
                await asyncio.gather(releasing, return_exceptions=True)
                continue
            try:
                claim = await self.node.claim_lane(key)
            except _DOWN:
                # nobody can claim anything, nor store anything: the job runs into its own
                # storage error (a clear 503 or notice) rather than waiting here unseen
                return
            if claim.mine or not claim.owner:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def idle(self, key: str, *, ran_here: bool = True) -> None:
        """``ran_here``: the rows claimed under the lane ran here (settled as it goes); not so for a
        lane let go because nothing of its chat ran here (``_let_quiet_lanes_go``)."""
        # rows taken from the chat's inbox are on their way into the lane: letting it go would
        # settle them unrun (``finish_claimed``); the inbox run lets it go when it is done
        if key in self._releasing or key in self._inbox_turns or self.node.lane_token(key) is None:
            return
        # at a stop, jobs were dropped: their rows stay for the next owner
        settle = ran_here and not (self.stopping or self._stopped)

        async def release() -> None:
            try:
                await self.node.release_lane(key, settle=settle)
            finally:
                self._releasing.pop(key, None)

        self._releasing[key] = asyncio.create_task(release(), name=f"lane-release:{key}")

    def holder(self, key: str) -> tuple[str, int] | None:
        token = self.node.lane_token(key)
        return None if token is None else (self.node.node_id, token)

    def fence(self, key: str) -> Callable[[Any], bool] | None:
        token = self.node.lane_token(key)
        if token is None:
            return None
        return partial(pc.hold_lease, kind="lane", name=key, node_id=self.node.node_id, token=token)

    async def handed_off(self, msg: InboundMessage, key: str) -> bool:
        """A message for a chat another live node serves goes to that node's inbox. Only what
        nobody waits for here (a webhook's update): an HTTP API caller waits on this node, which
        then waits for the chat (``enter``); a message with files stays here too (its files were
        fetched by this node), but takes the chat's lane when nobody serves it, so that it is
        parked under it. A message this node runs joins its lane only after what waited in the
        chat's inbox (handed here while another node served the chat, which then died): the
        chat's order holds across a failover."""
        if _RUNNING.get() is msg or msg.awaits_answer:
            return False  # a row of the inbox itself (run here in its turn), or one that waits here
        pending = False
        if self.node.lane_token(key) is None:
            try:
                claim = await self.node.claim_lane(key)
                if claim.owner and not claim.mine and msg.attachments:
                    return False  # it waits here for the chat (``enter``): not parked, a gap the README names
                if claim.owner and not claim.mine:
                    await self.node.store.write(self.node.hand_off(key, to_payload(msg), claim.owner,
                                                                   platform=msg.platform, delivery_key=msg.delivery_key))
                    log.info("cluster.handed_off", session_key=key, owner=claim.owner)
                    return True
            except _DOWN as exc:
                if msg.platform_retries:  # not taken: the platform delivers it again (Disposition.DEFERRED)
                    raise StorageUnavailableError(f"the chat's lane could not be claimed ({type(exc).__name__})") from exc
                return False  # it runs here, into its own storage error
            pending = claim.pending
        if pending or self.node.inbox_due(key):
            with contextlib.suppress(*_DOWN):
                await self._run_inbox(key, then_let_go=False)  # the message goes into the lane next
        return False

    async def _run_inbox(self, key: str, *, then_let_go: bool = True) -> None:
        """What other nodes handed to this chat's lane (or parked in it and died), in order, into the
        lane here. A row is the message's parked row (``gateway.routing.parking``): done when its
        answer is stored or its job ended, when a handed copy's question is stored
        (``inbound.record``), or when the lane runs dry; the others once the router answered them.
        A crash before that leaves it to the chat's next owner; none is run twice. One run per chat at a time: a
        message that came directly waits here until the rows ahead of it are in the lane.
        ``then_let_go``: the lane goes when nothing of the rows waits in it (not for a message
        that came directly: it is parked under the lane next)."""
        if self._stopped or self.stopping:
            return  # left in the inbox: the node that takes the chat over runs them
        turn = self._inbox_turns.setdefault(key, _InboxTurn())
        turn.users += 1
        try:
            async with turn.lock:
                token = self.node.lane_token(key)
                router = self._runtime.router
                for row in await self.node.take_inbox(key):
                    with structlog.contextvars.bound_contextvars(session_key=key, handed_from=row.from_node):
                        try:
                            msg = from_payload(row.payload)
                        except (ValueError, TypeError, KeyError):
                            log.error("cluster.inbox_row_unreadable", inbox_id=row.id)
                        else:
                            running = _RUNNING.set(msg)
                            try:  # the row is the message's parked row: its answer (or its end) settles it
                                if await router.handle(msg, ParkTicket(row.id)) is Disposition.ACCEPTED:
                                    continue  # its turn's question or answer settles it, or the lane running dry
                            finally:
                                _RUNNING.reset(running)
                        if token is not None:
                            await self.node.store.write(partial(pc.finish_inbox, inbox_id=row.id,
                                                                node_id=self.node.node_id, token=token))
        finally:
            turn.users -= 1
            if not turn.users:
                del self._inbox_turns[key]
                if then_let_go and not self._runtime.services.lanes.busy(key):  # each row answered at once
                    self.idle(key)

    # -- every heartbeat --------------------------------------------------------------------

    async def _every_heartbeat(self) -> None:
        quiet: set[str] = set()
        while True:
            self.view = await cluster_view(self.node, self.view)
            quiet = self._let_quiet_lanes_go(quiet)
            await asyncio.sleep(self.node.config.heartbeat)

    def _let_quiet_lanes_go(self, before: set[str]) -> set[str]:
        """A lane held here with nothing of its chat running or waiting here, at two looks a
        heartbeat apart, is let go; the quiet ones now. Its release was missed: the lane lapsed
        here a moment while its lease lived on (a late heartbeat renewed it), the release met the
        database away, a wake-up claimed it for nothing. Held for nothing, the lease would keep
        every other node waiting for the chat for as long as this one lives."""
        lanes = self._runtime.services.lanes
        quiet = {key for key in self.node.lanes_held()
                 if not lanes.busy(key) and key not in self._inbox_turns and not self.node.inbox_due(key)}
        for key in sorted(quiet & before):
            log.info("cluster.quiet_lane_let_go", session_key=key)
            self.idle(key, ran_here=False)
        return quiet
