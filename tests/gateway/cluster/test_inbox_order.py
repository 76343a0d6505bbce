"""A chat's order across a failover: a message handed to an owner that then died waits in the
inbox; the next message for that chat, reaching a node that now takes the chat over, runs after
it, never before. Real ``ClusterDuties`` and ``ClusterNode`` over a real PostgreSQL server and
the real ``Lanes``; the router is reduced to what it does with a gate (hand off, else queue in
the lane), since the order is decided there."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from adapters.base import ChatType, Disposition, InboundMessage
from gateway.config import load_config
from gateway.daemon.clustered import ClusterDuties
from gateway.routing.lanes import Lanes
from gateway.routing.parking import ParkTicket
from storage.postgres import PgStore
from storage.postgres import cluster as pc

pytestmark = pytest.mark.asyncio
KEY = "agent:main:telegram:dm:7"


class _Router:
    """What ``Router._enqueue`` does with a gate, recording the order the lane runs jobs in."""

    def __init__(self, lanes: Lanes) -> None:
        self.lanes = lanes
        self.ran: list[str] = []
        #: set: each turn stalls at its start (this node dies mid-turn, before its question is stored)
        self.stall = asyncio.Event()

    async def handle(self, msg: InboundMessage, parked: ParkTicket | None = None) -> Disposition:
        gate = self.lanes.gate
        assert gate is not None
        if await gate.handed_off(msg, KEY):
            return Disposition.ANSWERED

        async def job() -> None:
            if self.stall.is_set():
                await asyncio.Event().wait()
            self.ran.append(msg.text)

        self.lanes.submit(KEY, job)
        return Disposition.ACCEPTED


def _msg(text: str, n: int) -> InboundMessage:
    return InboundMessage(platform="telegram", chat_id="7", chat_type=ChatType.DM, user_id="7", text=text,
                          message_id=str(n))


async def _duties(stack: AsyncExitStack, tmp_path: Path, url: str, node_id: str) -> tuple[ClusterDuties, _Router]:
    home = tmp_path / node_id
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"cluster": {"node_id": node_id, "failover_s": 2}}))
    config = load_config(home, environ={})
    store = await stack.enter_async_context(PgStore(url, min_size=1, max_size=4, connect_timeout=2))
    lanes = Lanes(max_concurrent=4, max_queued_per_key=10)
    router = _Router(lanes)
    runtime: Any = SimpleNamespace(router=router, scheduler=None, handoffs=SimpleNamespace(),
                                   services=SimpleNamespace(lanes=lanes, delivery=SimpleNamespace()))

    async def nothing(*_: object) -> None:
        return None

    duties = ClusterDuties(config, store, runtime, {}, supervise=nothing, standby=lambda _: None, sweeper=nothing)
    return duties, router


async def test_a_message_after_a_failover_runs_after_the_one_handed_to_the_dead_owner(
    tmp_path: Path, pg_url: str, stack: AsyncExitStack
) -> None:
    dead, _ = await _duties(stack, tmp_path, pg_url, "dead")
    edge, router = await _duties(stack, tmp_path, pg_url, "edge")
    # "dead" serves the chat, then dies: nothing renews its lease (its loops never ran)
    assert (await dead.node.claim_lane(KEY)).mine
    # the edge node is not started either: what its heartbeat would announce (on_inbox) waits
    # in its queue, as when its callbacks are busy elsewhere; the direct message must not pass
    assert await edge.handed_off(_msg("m3", 3), KEY)
    assert router.ran == []
    async with asyncio.timeout(30):  # the dead node's lease lapses (failover_s = 2)
        while (await edge.node.claim_lane(KEY)).owner == "dead":
            await asyncio.sleep(0.1)
    await router.handle(_msg("m4", 4))
    await router.lanes.wait_idle(KEY)
    assert router.ran == ["m3", "m4"]
    store = edge.node.store
    assert await store.read(partial(pc.pending_keys, node_id="edge")) == []
    # the row is done: whoever serves the chat next never runs m3 again
    assert await store.read(pc.orphan_keys) == []


async def test_a_handed_message_taken_by_an_owner_that_died_before_its_question_is_run_by_the_next(
    tmp_path: Path, pg_url: str, stack: AsyncExitStack
) -> None:
    """The row is not done when the dead owner's lane took it, only once its question is stored
    (or the lane ran dry): the next owner runs it, once, before a later message."""
    dead, dead_router = await _duties(stack, tmp_path, pg_url, "dead")
    edge, router = await _duties(stack, tmp_path, pg_url, "edge")
    assert (await dead.node.claim_lane(KEY)).mine
    assert await edge.handed_off(_msg("m1", 1), KEY)
    dead_router.stall.set()
    await dead._run_inbox(KEY)  # its lane took m1 and its turn began; then the node died
    async with asyncio.timeout(30):
        while not dead_router.lanes.is_running(KEY):
            await asyncio.sleep(0.01)
    assert dead_router.ran == []
    async with asyncio.timeout(30):
        while (await edge.node.claim_lane(KEY)).owner == "dead":
            await asyncio.sleep(0.1)
    await router.handle(_msg("m2", 2))
    await router.lanes.wait_idle(KEY)
    assert router.ran == ["m1", "m2"]
    store = edge.node.store
    async with asyncio.timeout(30):  # the lane ran dry here: what it took is settled with its release
        while await store.read(lambda c: c.execute(
                "SELECT count(*) FROM cluster_inbox WHERE done_at IS NULL").fetchone()[0]):
            await asyncio.sleep(0.05)
    await dead_router.lanes.drain(0)


async def test_recording_a_handed_message_as_seen_settles_its_row(pg_url: str) -> None:
    """The owner's question transaction records the message (``inbound.record``): its handed copy
    is done in the same transaction, and only that one."""
    from storage.postgres import inbound

    async with PgStore(pg_url) as store:
        for n in (1, 2):
            await store.write(partial(pc.put_inbox, session_key=KEY, payload="{}", from_node="edge",
                                      owner_node="owner", platform="telegram", delivery_key=f"7:{n}"))
        await store.write(partial(inbound.record, platform="telegram", delivery_key="7:1", now=1.0))
        rows = await store.read(lambda c: c.execute(
            "SELECT delivery_key, done_at IS NOT NULL FROM cluster_inbox ORDER BY id").fetchall())
    assert [tuple(r) for r in rows] == [("7:1", True), ("7:2", False)]
