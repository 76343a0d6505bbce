"""Several ``ClusterNode``s in one process against a real PostgreSQL server: roles elected once
each and taken over when their holder leaves, lanes with one owner, hand-offs woken by NOTIFY
and run once in order, a database restart survived."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from functools import partial

import pytest
from structlog.testing import capture_logs

from gateway.cluster import ClusterNode
from gateway.config import ClusterConfig
from storage.postgres import PgStore
from storage.postgres import cluster as pc
from tests.gateway.cluster._nodes import ROLES, Events, holders, start_node, until
from tests.gateway.cluster._runner import create_ran_table, ran_rows
from tests.pg.server import PgServer

pytestmark = pytest.mark.asyncio
async def test_each_role_has_one_holder_and_another_takes_it_when_it_leaves(pg_url: str, stack: AsyncExitStack) -> None:
    events = Events()
    nodes = [(await start_node(stack, pg_url, f"n{i}", events))[0] for i in range(3)]
    await until(lambda: all(len(holders(nodes, r)) == 1 for r in ROLES), "every role held")
    store = nodes[0].store
    leases = await store.read(partial(pc.list_leases, kind="role"))
    assert {le.name: le.node_id for le in leases} == {r: holders(nodes, r)[0] for r in ROLES}
    listed = await store.read(pc.list_nodes)
    assert sorted(n.node_id for n in listed) == ["n0", "n1", "n2"]
    assert sorted(r for n in listed for r in n.roles) == sorted(ROLES)

    leaving = next(n for n in nodes if n.roles_held)
    had = set(leaving.roles_held)
    await leaving.stop()
    rest = [n for n in nodes if n is not leaving]
    await until(lambda: all(len(holders(rest, r)) == 1 for r in had), "the roles taken over")
    assert all(not leaving.holds_role(r) for r in ROLES)
    assert {(leaving.node_id, "lost", r) for r in had} <= set(events.items)
    for role in had:
        assert (holders(rest, role)[0], "acquired", role) in events.items
    for role in ROLES:  # never two holders, in the database either
        lease = await store.read(partial(pc.holder, kind="role", name=role))
        assert lease is not None and [lease.node_id] == holders(rest, role)


async def test_a_lane_has_one_owner_however_many_nodes_claim_it(pg_url: str, stack: AsyncExitStack) -> None:
    events = Events()
    nodes = [(await start_node(stack, pg_url, f"n{i}", events, roles=()))[0] for i in range(3)]
    keys = [f"chat:{i}" for i in range(12)]
    for _ in range(5):
        claims = await asyncio.gather(*(n.claim_lane(k) for n in nodes for k in keys))
        for key in keys:
            mine = [c for c in claims if c.key == key and c.mine]
            assert len(mine) == 1, key
            assert {c.owner for c in claims if c.key == key} == {mine[0].owner}
    owner = next(n for n in nodes if n.lane_token(keys[0]) is not None)
    await owner.release_lane(keys[0])
    assert owner.lane_token(keys[0]) is None
    other = next(n for n in nodes if n is not owner)
    claim = await other.claim_lane(keys[0])
    assert claim.mine and claim.owner == other.node_id


async def test_a_hand_off_wakes_the_owner_which_runs_the_rows_once_in_order(pg_url: str, stack: AsyncExitStack) -> None:
    events = Events()
    # heartbeats far apart: the rows can only be found through the NOTIFY
    owner, store = await start_node(stack, pg_url, "owner", events, roles=(), runner=True, failover_s=600)
    edge, edge_store = await start_node(stack, pg_url, "edge", events, roles=(), failover_s=600)
    await store.write(create_ran_table)
    assert (await owner.claim_lane("chat:a")).mine
    claim = await edge.claim_lane("chat:a")
    assert not claim.mine and claim.owner == "owner"
    for i in range(30):
        await edge_store.write(edge.hand_off("chat:a", f"m{i}", claim.owner))

    async def done() -> list[tuple[int, str, str, str]]:
        return await store.read(ran_rows)

    async with asyncio.timeout(60):
        while len(await done()) < 30:
            await asyncio.sleep(0.05)
    rows = await done()
    assert [r[2] for r in rows] == [f"m{i}" for i in range(30)]
    assert {r[3] for r in rows} == {"owner"}
    assert len({r[0] for r in rows}) == 30
    assert await store.read(pc.orphan_keys) == [] and await store.read(partial(pc.pending_keys, node_id="owner")) == []


async def test_rows_of_a_lane_nobody_holds_are_adopted_and_run(pg_url: str, stack: AsyncExitStack) -> None:
    """A row written for an owner that let the lane go (or died) is found by a heartbeat's poll."""
    events = Events()
    node, store = await start_node(stack, pg_url, "n0", events, roles=(), runner=True)
    await store.write(create_ran_table)
    for i in range(3):
        await store.write(partial(pc.put_inbox, session_key="chat:b", payload=f"m{i}", from_node="x", owner_node="gone"))
    node.wake()
    async with asyncio.timeout(60):
        while len(await store.read(ran_rows)) < 3:
            await asyncio.sleep(0.05)
    assert [(r[2], r[3]) for r in await store.read(ran_rows)] == [("m0", "n0"), ("m1", "n0"), ("m2", "n0")]
    assert node.lane_token("chat:b") is not None


async def test_a_database_restart_is_survived(pg_server: PgServer, pg_url: str, stack: AsyncExitStack) -> None:
    events = Events()
    nodes = [(await start_node(stack, pg_url, f"n{i}", events, runner=True))[0] for i in range(2)]
    store = nodes[0].store
    await store.write(create_ran_table)
    await until(lambda: all(len(holders(nodes, r)) == 1 for r in ROLES), "every role held")
    assert (await nodes[0].claim_lane("chat:r")).mine
    before = {n.node_id: n.heartbeat_at for n in await store.read(pc.list_nodes)}

    await asyncio.to_thread(pg_server.restart)

    async def beats_after() -> bool:
        try:
            now = {n.node_id: n.heartbeat_at for n in await store.read(pc.list_nodes)}
        except Exception:
            return False
        return all(now.get(k, 0) > v for k, v in before.items())

    async with asyncio.timeout(120):
        while not await beats_after():
            await asyncio.sleep(0.1)
    await until(lambda: all(len(holders(nodes, r)) == 1 for r in ROLES), "every role held again")
    for role in ROLES:
        lease = await store.read(partial(pc.holder, kind="role", name=role))
        assert lease is not None and [lease.node_id] == holders(nodes, role)
    # lanes and hand-offs work again, the listener included (it reconnected)
    assert (await nodes[0].claim_lane("chat:r")).mine
    claim = await nodes[1].claim_lane("chat:r")
    assert not claim.mine and claim.owner == "n0"
    await store.write(nodes[1].hand_off("chat:r", "after", claim.owner))
    async with asyncio.timeout(60):
        while [r[2] for r in await store.read(ran_rows)] != ["after"]:
            await asyncio.sleep(0.05)


async def test_a_database_away_for_longer_than_failover_loses_the_roles_and_they_come_back(
    pg_server: PgServer, pg_url: str, stack: AsyncExitStack,
) -> None:
    """The database refuses the nodes (connections not allowed, their sessions ended): nobody renews,
    each node lets its roles go by its own deadline, and takes them again once it is back."""
    events = Events()
    nodes = [(await start_node(stack, pg_url, f"n{i}", events, failover_s=2.0))[0] for i in range(2)]
    await until(lambda: all(len(holders(nodes, r)) == 1 for r in ROLES), "every role held")
    database = pg_url.rsplit("/", 1)[1]
    pg_server.psql(f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")
    pg_server.psql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'")
    await until(lambda: not any(n.roles_held for n in nodes), "every role let go while the database is away")
    assert all(n.snapshot()["database"] == "away" and n.snapshot()["roles"] == [] for n in nodes)
    assert {(n, r) for n, e, r in events.items if e == "lost"} >= {(h, r) for h, e, r in events.items if e == "acquired"}
    acquired_before = sum(1 for item in events.items if item[1] == "acquired")
    pg_server.psql(f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
    await until(lambda: all(len(holders(nodes, r)) == 1 for r in ROLES), "every role held again")
    assert sum(1 for item in events.items if item[1] == "acquired") >= acquired_before + len(ROLES)
    holding = [n for n in nodes if n.roles_held]
    assert holding and all(n.snapshot()["database"] == "up" for n in holding)
    assert sorted(r for n in nodes for r in n.snapshot()["roles"]) == sorted(ROLES)  # type: ignore[attr-defined]


async def test_the_listener_comes_back_after_a_database_restart(
    pg_server: PgServer, pg_url: str, stack: AsyncExitStack,
) -> None:
    """Heartbeats far apart: after the restart a hand-off can only reach the owner through its
    listener, which must have connected and listened again."""
    events = Events()
    owner, store = await start_node(stack, pg_url, "owner", events, roles=(), runner=True, failover_s=600)
    edge, _ = await start_node(stack, pg_url, "edge", events, roles=(), failover_s=600)
    await store.write(create_ran_table)
    assert (await owner.claim_lane("chat:l")).mine
    await asyncio.to_thread(pg_server.restart)
    claim = await edge.claim_lane("chat:l")
    assert claim.owner == "owner"
    for i in range(3):
        await store.write(edge.hand_off("chat:l", f"m{i}", claim.owner))
    async with asyncio.timeout(60):
        while len(await store.read(ran_rows)) < 3:
            await asyncio.sleep(0.05)
    assert [(r[2], r[3]) for r in await store.read(ran_rows)] == [("m0", "owner"), ("m1", "owner"), ("m2", "owner")]


async def test_a_claim_says_when_messages_wait_and_a_node_that_runs_no_inbox_adopts_none(
    pg_url: str, stack: AsyncExitStack,
) -> None:
    events = Events()
    node, store = await start_node(stack, pg_url, "n0", events, roles=())  # no on_inbox
    for i in range(2):
        await store.write(partial(pc.put_inbox, session_key="chat:w", payload=f"m{i}", from_node="x", owner_node="gone"))
    node.wake()
    before = (await store.read(pc.list_nodes))[0].heartbeat_at
    async with asyncio.timeout(60):
        while (await store.read(pc.list_nodes))[0].heartbeat_at == before:
            await asyncio.sleep(0.05)
    assert node.lane_token("chat:w") is None and await store.read(pc.orphan_keys) == ["chat:w"]
    claim = await node.claim_lane("chat:w")
    assert claim.mine and claim.pending
    assert [r.payload for r in await node.take_inbox("chat:w")] == ["m0", "m1"]
    assert await node.take_inbox("chat:w") == []
    other = await node.claim_lane("chat:none")
    assert other.mine and not other.pending


async def test_a_callback_that_raises_is_logged_and_the_next_callbacks_still_run(
    pg_url: str, stack: AsyncExitStack
) -> None:
    got: list[str] = []

    def acquired(role: str) -> None:
        got.append(role)
        if len(got) == 1:  # e.g. the scheduler's start meeting the database away
            raise RuntimeError("the first callback fails")

    store = await stack.enter_async_context(PgStore(pg_url, min_size=1, max_size=6, connect_timeout=2))
    node = ClusterNode(store, ClusterConfig(node_id="n0", failover_s=3.0), roles=("scheduler", "slack"),
                       on_acquired=acquired)
    with capture_logs() as logs:
        await node.start()
        stack.push_async_callback(node.stop)
        await until(lambda: sorted(got) == ["scheduler", "slack"], "both roles' callbacks ran")
    [failed] = [e for e in logs if e["event"] == "cluster.callback_failed"]
    assert failed["kind"] == "acquired" and failed["name"] == got[0]
