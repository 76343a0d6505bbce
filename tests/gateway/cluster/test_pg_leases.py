"""The cluster's tables on a real PostgreSQL server: leases (one holder at a time, fencing
tokens that only grow, expiry by the database's clock) and the hand-off inbox (in order, once)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from functools import partial

import pytest

from storage.postgres import PgConnection, PgStore
from storage.postgres import cluster as pc
from storage.postgres import inbound as pg_inbound

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PgStore]:
    async with PgStore(pg_url, min_size=1, max_size=8) as s:
        yield s


def _expire(conn: PgConnection, kind: str, name: str) -> None:
    # what the passing of ttl seconds does, without waiting for it (test-only SQL)
    conn.execute("UPDATE cluster_leases SET expires_at = expires_at - 3600 WHERE kind = %s AND name = %s", (kind, name))


async def test_one_holder_renewal_keeps_token_takeover_after_expiry_gets_a_larger_one(store: PgStore) -> None:
    a = await store.write(partial(pc.acquire, kind="role", name="telegram", node_id="a", ttl=30))
    assert a is not None and a.node_id == "a"
    b = await store.write(partial(pc.acquire, kind="role", name="telegram", node_id="b", ttl=30))
    assert b == a  # b sees a's live lease and does not get it
    again = await store.write(partial(pc.acquire, kind="role", name="telegram", node_id="a", ttl=30))
    assert again is not None and again.token == a.token and again.expires_at >= a.expires_at
    await store.write(partial(_expire, kind="role", name="telegram"))
    assert await store.read(partial(pc.holder, kind="role", name="telegram")) is None
    b = await store.write(partial(pc.acquire, kind="role", name="telegram", node_id="b", ttl=30))
    assert b is not None and b.node_id == "b" and b.token > a.token
    # a's old token fences nothing any more; a release under it frees nothing
    assert not await store.write(partial(pc.hold_lease, kind="role", name="telegram", node_id="a", token=a.token))
    assert not await store.write(partial(pc.release, kind="role", name="telegram", node_id="a", token=a.token))
    assert await store.write(partial(pc.hold_lease, kind="role", name="telegram", node_id="b", token=b.token))
    renewed = await store.write(partial(pc.renew_all, node_id="a", ttl=30))
    assert renewed == []
    assert [le.name for le in await store.write(partial(pc.renew_all, node_id="b", ttl=30))] == ["telegram"]
    assert await store.write(partial(pc.release, kind="role", name="telegram", node_id="b", token=b.token))
    c = await store.write(partial(pc.acquire, kind="role", name="telegram", node_id="a", ttl=30))
    assert c is not None and c.node_id == "a" and c.token > b.token


def _clock(conn: PgConnection) -> float:
    row = conn.execute("SELECT extract(epoch from clock_timestamp())::float8").fetchone()  # test-only SQL
    assert row is not None
    return float(row[0])


async def test_many_nodes_racing_for_the_same_leases_never_share_one(store: PgStore) -> None:
    """Eight nodes run acquire/renew/release rounds on three keys at once. Each grant records
    the database's clock once it holds the lease and again just before it lets go (still
    holding it); ordered by token, no grant's hold reaches into the next one's."""
    keys = ["k1", "k2", "k3"]
    grants: list[tuple[str, str, int, float, float]] = []  # key, node, token, held from, held until

    def acquire_stamped(conn: PgConnection, key: str, node: str) -> tuple[pc.Lease | None, float]:
        lease = pc.acquire(conn, "lane", key, node, ttl=30)
        return lease, _clock(conn)

    def release_stamped(conn: PgConnection, key: str, node: str, token: int) -> tuple[bool, float]:
        held = pc.hold_lease(conn, "lane", key, node, token)
        at = _clock(conn)
        return held and pc.release(conn, "lane", key, node, token), at

    async def node(name: str) -> None:
        for i in range(60):
            key = keys[i % len(keys)]
            lease, since = await store.write(partial(acquire_stamped, key=key, node=name))
            if lease is None or lease.node_id != name:
                continue
            renewed = await store.write(partial(pc.renew_all, node_id=name, ttl=30))
            assert key in {le.name for le in renewed}
            ok, until = await store.write(partial(release_stamped, key=key, node=name, token=lease.token))
            assert ok
            grants.append((key, name, lease.token, since, until))

    await asyncio.gather(*(node(f"n{i}") for i in range(8)))
    assert len({g[1] for g in grants}) > 1  # the race was real: leases changed hands
    for key in keys:
        spans = sorted((g for g in grants if g[0] == key), key=lambda g: g[2])
        assert len({g[2] for g in spans}) == len(spans)  # a token is never handed out twice
        for earlier, later in itertools.pairwise(spans):
            assert earlier[4] < later[3], f"{key}: {earlier[1]} and {later[1]} held it at once, or a later grant drew a smaller token"


async def test_inbox_rows_are_claimed_in_order_once_per_token_and_finished_once(store: PgStore) -> None:
    lease = await store.write(partial(pc.acquire, kind="lane", name="chat", node_id="owner", ttl=30))
    assert lease is not None
    ids = [
        await store.write(partial(pc.put_inbox, session_key="chat", payload=f"m{i}", from_node="edge", owner_node="owner"))
        for i in range(5)
    ]
    assert await store.read(partial(pc.pending_keys, node_id="owner")) == ["chat"]
    # another node, not the owner, claims nothing
    assert await store.write(partial(pc.claim_inbox, session_key="chat", node_id="edge", token=lease.token)) == []
    first = await store.write(partial(pc.claim_inbox, session_key="chat", node_id="owner", token=lease.token, limit=3))
    assert [r.payload for r in first] == ["m0", "m1", "m2"] and [r.id for r in first] == ids[:3]
    rest = await store.write(partial(pc.claim_inbox, session_key="chat", node_id="owner", token=lease.token))
    assert [r.payload for r in rest] == ["m3", "m4"]
    assert await store.write(partial(pc.claim_inbox, session_key="chat", node_id="owner", token=lease.token)) == []
    assert await store.read(partial(pc.pending_keys, node_id="owner")) == []
    assert await store.write(partial(pc.finish_inbox, inbox_id=ids[0], node_id="owner", token=lease.token))
    assert not await store.write(partial(pc.finish_inbox, inbox_id=ids[0], node_id="owner", token=lease.token))

    # the owner dies: its lease lapses; the rows it claimed but never finished are orphans,
    # taken over by the next owner under a new token, and the stale owner can finish none
    await store.write(partial(_expire, kind="lane", name="chat"))
    assert await store.read(partial(pc.orphan_keys)) == ["chat"]
    heir = await store.write(partial(pc.acquire, kind="lane", name="chat", node_id="heir", ttl=30))
    assert heir is not None and heir.node_id == "heir" and heir.token > lease.token
    assert not await store.write(partial(pc.finish_inbox, inbox_id=ids[1], node_id="owner", token=lease.token))
    again = await store.write(partial(pc.claim_inbox, session_key="chat", node_id="heir", token=heir.token))
    assert [r.payload for r in again] == ["m1", "m2", "m3", "m4"]
    for row in again:
        assert await store.write(partial(pc.finish_inbox, inbox_id=row.id, node_id="heir", token=heir.token))
    assert await store.read(partial(pc.orphan_keys)) == []


async def test_a_parked_message_is_left_to_its_node_while_it_lives_then_to_the_chats_next_owner(
        store: PgStore) -> None:
    """``inbound.park`` on PostgreSQL: a row of the inbox already claimed by the lane's holder. Nothing
    wakes another node for it while the holder lives; once its lease lapses, the heir runs it."""
    lease = await store.write(partial(pc.acquire, kind="lane", name="chat", node_id="owner", ttl=30))
    assert lease is not None
    parked = [await store.write(partial(pg_inbound.park, session_key="chat", platform="telegram", user_id="7",
                                        payload=f"p{i}", now=time.time(), node_id="owner", token=lease.token))
              for i in range(3)]
    assert await store.read(partial(pc.pending_keys, node_id="owner")) == []  # not "handed here" again
    assert await store.read(partial(pc.orphan_keys)) == []
    assert await store.write(partial(pc.claim_inbox, session_key="chat", node_id="owner", token=lease.token)) == []
    await store.write(partial(pg_inbound.unpark, park_id=parked[0]))  # answered
    await store.write(partial(pg_inbound.unpark, park_id=parked[0]))  # twice: nothing more
    assert await store.read(pg_inbound.parked) == []  # nothing for a start to take: the heir does
    assert [await store.read(partial(pg_inbound.is_parked, park_id=i)) for i in parked] == [False, True, True]

    await store.write(partial(_expire, kind="lane", name="chat"))  # the owner died with two unanswered
    assert await store.read(partial(pc.orphan_keys)) == ["chat"]
    heir = await store.write(partial(pc.acquire, kind="lane", name="chat", node_id="heir", ttl=30))
    assert heir is not None
    again = await store.write(partial(pc.claim_inbox, session_key="chat", node_id="heir", token=heir.token))
    assert [r.payload for r in again] == ["p1", "p2"] and [r.from_node for r in again] == ["owner", "owner"]
    with pytest.raises(ValueError, match="node holding its lane"):
        await store.write(partial(pg_inbound.park, session_key="chat", platform="telegram", user_id="7",
                                  payload="p", now=time.time()))


async def test_a_notify_wakes_a_listener_at_commit_and_only_then(store: PgStore) -> None:
    got: asyncio.Queue[tuple[str, str]] = asyncio.Queue()

    async def listen() -> None:
        async for item in pc.inbox_wakeups(store):
            await got.put(item)

    task = asyncio.create_task(listen())
    try:
        assert await asyncio.wait_for(got.get(), 30) == ("", "")  # listening now

        def put_then_fail(conn: PgConnection) -> None:
            pc.put_inbox(conn, "lost", "x", from_node="edge", owner_node="owner")
            raise RuntimeError("rolled back")

        with pytest.raises(RuntimeError):
            await store.write(put_then_fail)
        await store.write(partial(pc.put_inbox, session_key="chat:1", payload="x", from_node="edge", owner_node="owner"))
        assert await asyncio.wait_for(got.get(), 30) == ("owner", "chat:1")
        assert got.empty()  # the rolled-back row woke nobody
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_nodes_are_listed_with_the_roles_they_hold(store: PgStore) -> None:
    await store.write(partial(pc.beat, node_id="a", host="h1", pid=11, holds={"lanes": 2}))
    await store.write(partial(pc.beat, node_id="b", host="h2", pid=12))
    await store.write(partial(pc.acquire, kind="role", name="slack", node_id="a", ttl=30))
    await store.write(partial(pc.acquire, kind="role", name="discord:0", node_id="a", ttl=30))
    nodes = await store.read(pc.list_nodes)
    assert [(n.node_id, n.host, n.pid, n.roles) for n in nodes] == [
        ("a", "h1", 11, ("discord:0", "slack")), ("b", "h2", 12, ()),
    ]
    assert nodes[0].holds == {"lanes": 2} and nodes[0].age < 3600
    started = nodes[0].started_at
    time.sleep(0.01)
    await store.write(partial(pc.beat, node_id="a", host="h1", pid=11))
    assert (await store.read(pc.list_nodes))[0].started_at == started
    assert await store.write(partial(pc.leave, node_id="a")) == 2
    assert [n.node_id for n in await store.read(pc.list_nodes)] == ["b"]
    assert await store.read(partial(pc.list_leases, kind="role")) == []
