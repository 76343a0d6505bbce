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

from adapters.base import ChatType, InboundMessage
from gateway.config import load_config
from gateway.daemon.clustered import ClusterDuties
from gateway.routing.lanes import Lanes
from storage.postgres import PgStore
from storage.postgres import cluster as pc

pytestmark = pytest.mark.asyncio
KEY = "agent:main:telegram:dm:7"


class _Router:
    """What ``Router._enqueue`` does with a gate, recording the order the lane runs jobs in."""

    def __init__(self, lanes: Lanes) -> None:
        self.lanes = lanes
        self.ran: list[str] = []

    async def handle(self, msg: InboundMessage) -> None:
        gate = self.lanes.gate
        assert gate is not None
        if await gate.handed_off(msg, KEY):
            return

        async def job() -> None:
            self.ran.append(msg.text)

        self.lanes.submit(KEY, job)


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
