"""``ClusterNode``: this process as one node of several over one PostgreSQL database.

It registers the node and heartbeats every ``cluster.heartbeat_s``; each heartbeat renews the
leases the node holds (its lanes and roles) and tries for the roles it wants, so a role whose
holder died is taken ``cluster.failover_s`` after that holder's last heartbeat (a node that
sees another hold a role wakes when that lease expires, not at its next heartbeat).

What the node holds is also bounded by its own clock: a lease counts as held until
``failover_s`` after the heartbeat that renewed it *began* (the database set its expiry later
than that), less a margin. When the database goes away nothing renews, and at that deadline
the node lets go by itself (``on_lost``), before the database would give the lease to another
node; when the database is back, the next heartbeat takes the roles again (``on_acquired``).
Work done under a lease commits only with its fencing token checked in the same transaction
(``storage.postgres.cluster.hold_lease`` / ``finish_inbox``), so a node that let go late
cannot commit anyway.

Hand-offs: a message for a key another node owns is written to the inbox (``hand_off``, in
the caller's transaction with its dedupe row); the owner hears the NOTIFY on a connection of
its own, and every heartbeat polls as well (a NOTIFY is lost while the listener reconnects).
``on_inbox(key)`` then tells the daemon to ``take_inbox(key)`` and run the rows in order.

Callbacks run one at a time, in the order of the events, on a task of their own: a slow
``on_acquired`` (a poller starting) never delays a heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

import structlog

from gateway.cluster._tick import SWEEP_EVERY, ClaimResult, TickResult, claim_lane, heartbeat
from gateway.config import ClusterConfig
from storage.errors import StorageClosedError, StorageUnavailableError
from storage.postgres import PgConnection, PgStore
from storage.postgres import cluster as pc

log = structlog.get_logger("hermes.cluster")

Callback = Callable[[str], Awaitable[None] | None]
_DOWN = (StorageUnavailableError, StorageClosedError, TimeoutError)


@dataclass(frozen=True)
class LaneClaim:
    key: str
    #: the node that serves the key now ("" when nobody could be told: the database is away)
    owner: str
    #: this node's fencing token when it is the owner
    token: int | None
    #: messages handed to this lane wait in its inbox: run them (``on_inbox`` is told) before
    #: a message that came to this node directly
    pending: bool = False

    @property
    def mine(self) -> bool:
        return self.token is not None


@dataclass
class _Held:
    token: int
    deadline: float  # time.monotonic() by which this node lets go unless renewed
    since: float = 0.0  # when this node took it (a heartbeat begun earlier may not list it)


class ClusterNode:
    def __init__(
        self,
        store: PgStore,
        config: ClusterConfig,
        *,
        roles: Sequence[str] = (),
        on_acquired: Callback | None = None,
        on_lost: Callback | None = None,
        on_inbox: Callback | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.node_id = config.effective_node_id()
        self.roles = tuple(dict.fromkeys(roles))
        self._on = {"acquired": on_acquired, "lost": on_lost, "inbox": on_inbox}
        self._ttl = config.failover_s
        # let go a little before the database would: clocks run at slightly different rates
        self._margin = min(1.0, config.failover_s * 0.1)
        self._roles: dict[str, _Held] = {}
        self._lanes: dict[str, _Held] = {}
        self._events: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        #: keys told to on_inbox, with how many of those calls have not ended yet
        self._inbox_due: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._ticks = 0
        self._down_since: float | None = None
        self._check_at = float("inf")  # monotonic time of an extra heartbeat (a handed-off lane's expiry)
        self._inflight: asyncio.Future[TickResult] | None = None
        self.log = log.bind(node=self.node_id)

    # -- what the daemon asks ---------------------------------------------------------------

    @property
    def roles_held(self) -> frozenset[str]:
        return frozenset(self._roles)

    def holds_role(self, role: str) -> bool:
        return role in self._roles

    def role_token(self, role: str) -> int | None:
        held = self._roles.get(role)
        return held.token if held is not None else None

    def lane_token(self, key: str) -> int | None:
        """This node's token for the lane while it holds it (by its own deadline)."""
        held = self._lanes.get(key)
        return held.token if held is not None and held.deadline > time.monotonic() else None

    def lanes_held(self) -> list[str]:
        """The keys whose lanes this node holds now (by its own deadlines)."""
        now = time.monotonic()
        return [key for key, held in self._lanes.items() if held.deadline > now]

    async def claim_lane(self, key: str) -> LaneClaim:
        """Serve ``key`` here if nobody else does. ``mine``: run the message here (after the
        inbox rows ``on_inbox`` announces); else hand it to ``owner`` (``hand_off``)."""
        token = self.lane_token(key)
        if token is not None and self._lanes[key].deadline - time.monotonic() > self.config.heartbeat:
            return LaneClaim(key, self.node_id, token)
        began = time.monotonic()
        result: ClaimResult = await self.store.write(partial(claim_lane, key=key, node_id=self.node_id, ttl=self._ttl))
        if result.lease is None:
            return LaneClaim(key, "", None)
        if result.lease.node_id != self.node_id:
            self._lanes.pop(key, None)
            # a message handed to that owner waits for it: if the owner is dead, its lease
            # expires then, and a heartbeat at that moment adopts the rows (not one later)
            check_at = began + result.lease.expires_at - result.db_now + 0.05
            if check_at < self._check_at:
                self._check_at = check_at
                self._wake.set()  # the heartbeat loop sets its next wait by it
            return LaneClaim(key, result.lease.node_id, None)
        self._lanes[key] = _Held(result.lease.token, began + self._ttl - self._margin, since=began)
        if result.pending:
            self._emit("inbox", key)
        return LaneClaim(key, self.node_id, result.lease.token, pending=result.pending)

    async def release_lane(self, key: str, *, settle: bool = True) -> None:
        """Let a quiet lane go (the next message for it may start on any node); ``settle``: the
        inbox rows it took ran here (not when its jobs were dropped at a stop: the next owner
        runs them)."""
        held = self._lanes.pop(key, None)
        if held is not None:
            with contextlib.suppress(*_DOWN):
                await self.store.write(partial(_let_lane_go, key=key, node_id=self.node_id, token=held.token,
                                               settle=settle))

    def inbox_due(self, key: str) -> bool:
        """Whether ``on_inbox`` was told of rows waiting for ``key`` and has not finished with
        them: a message that came here directly must not run before them."""
        return key in self._inbox_due

    def hand_off(self, key: str, payload: str, owner: str, *, platform: str | None = None,
                 delivery_key: str | None = None) -> Callable[[PgConnection], int]:
        """The inbox write for a message ``owner`` serves (its ``delivery_key``: recording the
        message as seen on the owner settles the row)."""
        return partial(pc.put_inbox, session_key=key, payload=payload, from_node=self.node_id, owner_node=owner,
                       platform=platform, delivery_key=delivery_key)

    async def take_inbox(self, key: str, *, limit: int = 100) -> list[pc.InboxRow]:
        """The key's waiting rows, oldest first, claimed under this node's token (none when it
        does not hold the lane). Each is done with ``finish_inbox(conn, row.id, node_id, token)``
        in the transaction that stores its turn's answer."""
        token = self.lane_token(key)
        if token is None:
            return []
        return await self.store.write(
            partial(pc.claim_inbox, session_key=key, node_id=self.node_id, token=token, limit=limit)
        )

    def snapshot(self) -> dict[str, object]:
        """What this node holds now, for ``status``; the other nodes are in
        ``storage.postgres.cluster.list_nodes``."""
        return {
            "node_id": self.node_id,
            "roles": sorted(self._roles),
            "lanes": len(self._lanes),
            "database": "away" if self._down_since is not None else "up",
            "failover_s": self._ttl,
        }

    def wake(self) -> None:
        """Heartbeat now (a poll of the inbox and of the roles)."""
        self._wake.set()

    # -- life ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """The first heartbeat (raises ``StorageUnavailableError`` when the database is away),
        then the loops. What an earlier process of this node id still held (it was killed, and
        came back before its leases ran out) is let go first: renewed here, its lanes would be
        this process's with nothing of theirs running, and the messages parked under them would
        wait for ever (a new take of a lane, under a new token, runs them)."""
        freed = await self.store.write(partial(pc.leave, node_id=self.node_id))
        if freed:
            self.log.info("cluster.earlier_process_let_go", leases=freed)
        await self._tick()
        self._tasks = [
            asyncio.create_task(self._heartbeats(), name="cluster-heartbeat"),
            asyncio.create_task(self._watch(), name="cluster-watch"),
            asyncio.create_task(self._listen(), name="cluster-listen"),
            asyncio.create_task(self._dispatch(), name="cluster-callbacks"),
        ]
        self.log.info("cluster.joined", roles=sorted(self._roles), failover_s=self._ttl)

    async def stop(self) -> None:
        """Stop the loops, let the roles go (``on_lost``, then freed in the database for the
        other nodes at once) and leave."""
        tasks, self._tasks = self._tasks, []
        dispatcher = tasks.pop() if tasks else None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._inflight is not None and not self._inflight.done():
            await asyncio.wait([self._inflight], timeout=self._ttl / 2)
        for role in sorted(self._roles):
            self._emit("lost", role)
        self._roles.clear()
        self._lanes.clear()
        if dispatcher is not None:
            # the last on_lost callbacks run (bounded: a stuck callback does not hang the stop)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._events.join(), self._ttl)
            dispatcher.cancel()
            await asyncio.gather(dispatcher, return_exceptions=True)
        try:
            await asyncio.wait_for(self.store.write(partial(pc.leave, node_id=self.node_id)), self.config.heartbeat)
        except _DOWN:
            self.log.warning("cluster.leave_failed", hint="its leases lapse after failover_s")
        self.log.info("cluster.left")

    # -- the loops ----------------------------------------------------------------------------

    async def _heartbeats(self) -> None:
        while True:
            self._wake.clear()  # before the tick: a wake-up during it asks for another one
            delay = await self._tick_safely()
            if self._check_at <= time.monotonic():
                self._check_at = float("inf")
            delay = max(0.0, min(delay, self._check_at - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    async def _tick_safely(self) -> float:
        """One heartbeat; the seconds until the next one."""
        try:
            return await self._tick()
        except _DOWN as exc:
            if self._down_since is None:
                self._down_since = time.monotonic()
                self.log.warning("cluster.database_away", error=str(exc) or type(exc).__name__)
            return min(self.config.heartbeat, 1.0)
        except Exception:
            self.log.exception("cluster.heartbeat_failed")
            return self.config.heartbeat

    async def _tick(self) -> float:
        began = time.monotonic()
        self._ticks += 1
        op = partial(
            heartbeat, node_id=self.node_id, host=socket.gethostname(), pid=os.getpid(),
            holds={"roles": sorted(self._roles), "lanes": len(self._lanes)}, ttl=self._ttl,
            roles=self.roles, sweep=self._ticks % SWEEP_EVERY == 0, adopt=self._on["inbox"] is not None,
        )
        # a heartbeat that outlives half the lease is given up on (the watch lets the leases go
        # at their deadlines meanwhile); a slow one that still returns in time counts
        # (shielded, and kept: stop() lets it end before leaving, or it could take roles again
        # after the node left)
        self._inflight = asyncio.ensure_future(self.store.write(op))
        self._inflight.add_done_callback(_retrieved)
        result: TickResult = await asyncio.wait_for(asyncio.shield(self._inflight), timeout=max(self._ttl / 2, 1.0))
        if self._down_since is not None:
            self.log.info("cluster.database_back", away_s=round(time.monotonic() - self._down_since, 1))
            self._down_since = None
        self._apply(result, began)
        delay = self.config.heartbeat
        for expires_at in result.others.values():
            # try for another's role the moment its lease expires (database time, measured
            # from this heartbeat's start): a dead holder's role is taken after failover_s
            delay = min(delay, max(0.05, expires_at - result.db_now + 0.05))
        return delay

    def _apply(self, result: TickResult, began: float) -> None:
        deadline = began + self._ttl - self._margin
        if deadline <= time.monotonic():
            return  # too late to count on: what it renewed is renewed again by the next heartbeat
        roles = {le.name: le.token for le in result.held if le.kind == "role"}
        lanes = {le.name: le.token for le in result.held if le.kind == "lane"}
        for role, held in list(self._roles.items()):
            if roles.get(role) != held.token:
                del self._roles[role]
                self._emit("lost", role)
        for role, token in roles.items():
            if role not in self._roles:
                self._emit("acquired", role)
            self._roles[role] = _Held(token, deadline)
        stale = [k for k, held in self._lanes.items() if lanes.get(k) != held.token and held.since < began]
        for key in stale:
            del self._lanes[key]
        for key, token in lanes.items():
            self._lanes[key] = _Held(token, deadline)
        for key in result.pending:
            self._emit("inbox", key)

    async def _watch(self) -> None:
        """Let go of what was not renewed in time (the database away, a heartbeat stuck)."""
        while True:
            now = time.monotonic()
            for role, held in list(self._roles.items()):
                if held.deadline <= now:
                    del self._roles[role]
                    self.log.warning("cluster.role_lapsed", role=role)
                    self._emit("lost", role)
            for key in [k for k, held in self._lanes.items() if held.deadline <= now]:
                del self._lanes[key]
            await asyncio.sleep(min(0.25, self.config.heartbeat / 4))

    async def _listen(self) -> None:
        backoff = 0.2
        while True:
            try:
                async for owner, key in pc.inbox_wakeups(self.store):
                    backoff = 0.2
                    if not owner:
                        self.wake()  # listening (again): poll for what a missed NOTIFY said
                    elif owner == self.node_id:
                        await self._woken(key)
            except _DOWN:
                pass
            except Exception:
                self.log.exception("cluster.listen_failed")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.config.heartbeat)

    async def _woken(self, key: str) -> None:
        if not key:
            self.wake()
        elif self.lane_token(key) is not None:
            self._emit("inbox", key)
        else:
            # the writer thought this node owned the key; it may have let it go meanwhile
            with contextlib.suppress(*_DOWN):
                await self.claim_lane(key)

    def _emit(self, kind: str, name: str) -> None:
        if self._on[kind] is not None:
            if kind == "inbox":
                self._inbox_due[name] = self._inbox_due.get(name, 0) + 1
            self._events.put_nowait((kind, name))

    async def _dispatch(self) -> None:
        while True:
            kind, name = await self._events.get()
            try:
                callback = self._on[kind]
                if callback is not None:
                    result = callback(name)
                    if inspect.isawaitable(result):
                        await result
            except Exception:
                self.log.exception("cluster.callback_failed", kind=kind, name=name)
            finally:
                if kind == "inbox" and (left := self._inbox_due.pop(name, 1) - 1) > 0:
                    self._inbox_due[name] = left
                self._events.task_done()


def _let_lane_go(conn: PgConnection, *, key: str, node_id: str, token: int, settle: bool) -> None:
    """The lane ran dry: the inbox rows it took ran here (settled), and the lease is given up."""
    if settle:
        pc.finish_claimed(conn, key, node_id, token)
    pc.release(conn, kind="lane", name=key, node_id=node_id, token=token)


def _retrieved(future: asyncio.Future[TickResult]) -> None:
    """A heartbeat given up on may fail later: its error is known already (no "never retrieved")."""
    if not future.cancelled():
        future.exception()
