"""``kill -9`` of a real node process: its role is taken by another node, and the chat it owned
is taken over with its inbox rows run exactly once, in order."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path

import pytest

from storage.postgres import PgStore
from storage.postgres import cluster as pc
from tests.gateway.cluster._nodes import Events, start_node, until
from tests.gateway.cluster._runner import create_ran_table, ran_rows

pytestmark = pytest.mark.asyncio
ROOT = Path(__file__).resolve().parents[3]


class Child:
    """A node in a process of its own (``_node_child``); its events as they come."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.events: list[tuple[str, str]] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            self.events.append((item["event"], item["name"]))

    async def wait_for(self, event: str, name: str = "", timeout: float = 60.0) -> None:
        async with asyncio.timeout(timeout):
            while (event, name) not in self.events:
                if self.proc.returncode is not None:
                    raise AssertionError(f"the node exited ({self.proc.returncode}) before {event} {name}")
                await asyncio.sleep(0.05)

    async def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        await asyncio.gather(self._reader, return_exceptions=True)


async def spawn(url: str, node_id: str, *, roles: str = "", lanes: str = "", pause: float = 0.0,
                failover_s: float = 2.0) -> Child:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HERMES_LOG_LEVEL": "warning"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.gateway.cluster._node_child", url, node_id, str(failover_s), roles, lanes,
        str(pause), cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    return Child(proc)


@pytest.fixture
async def children() -> AsyncIterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        if child.proc.returncode is None:
            await child.kill9()


async def test_a_role_held_by_a_killed_node_is_taken_by_another(
    pg_url: str, children: list[Child], stack: AsyncExitStack,
) -> None:
    first = await spawn(pg_url, "first", roles="telegram,discord:0")
    children.append(first)
    await first.wait_for("acquired", "telegram")
    await first.wait_for("acquired", "discord:0")
    events = Events()
    second, store = await start_node(stack, pg_url, "second", events, failover_s=2.0, roles=("telegram", "discord:0"))
    held = await store.read(partial(pc.holder, kind="role", name="telegram"))
    assert held is not None and held.node_id == "first"
    assert not second.roles_held  # a live holder keeps its roles

    await first.kill9()
    await until(lambda: second.roles_held == {"telegram", "discord:0"}, "the roles taken over")
    now = await store.read(partial(pc.holder, kind="role", name="telegram"))
    assert now is not None and now.node_id == "second" and now.token > held.token
    assert ("second", "acquired", "telegram") in events.items


async def test_a_killed_owners_chat_is_run_by_the_next_owner_once_and_in_order(
    pg_url: str, children: list[Child], stack: AsyncExitStack,
) -> None:
    async with PgStore(pg_url, min_size=1, max_size=2) as setup:
        await setup.write(create_ran_table)
    owner = await spawn(pg_url, "owner", lanes="chat:k", pause=0.05)
    children.append(owner)
    await owner.wait_for("lane", "chat:k")
    events = Events()
    edge, store = await start_node(stack, pg_url, "edge", events, failover_s=2.0, roles=(), runner=True)
    claim = await edge.claim_lane("chat:k")
    assert not claim.mine and claim.owner == "owner"
    total = 40
    for i in range(total):
        await store.write(edge.hand_off("chat:k", f"m{i}", claim.owner))

    async def ran() -> list[tuple[int, str, str, str]]:
        return await store.read(ran_rows)

    async with asyncio.timeout(60):
        while sum(1 for r in await ran() if r[3] == "owner") < 5:
            await asyncio.sleep(0.02)
    await owner.kill9()
    async with asyncio.timeout(120):
        while len(await ran()) < total:
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # nothing more may come: a row run twice would show here
    rows = await ran()
    assert [r[2] for r in rows] == [f"m{i}" for i in range(total)]  # once each, in order
    ids = [r[0] for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == total
    by = [r[3] for r in rows]
    assert by[0] == "owner" and by[-1] == "edge"
    assert by == ["owner"] * by.count("owner") + ["edge"] * by.count("edge")  # one hand-over, never back
    assert await store.read(pc.orphan_keys) == [] and await store.read(partial(pc.pending_keys, node_id="edge")) == []


async def test_an_owner_paused_past_its_lease_cannot_store_a_turn_the_next_owner_ran(
    pg_url: str, children: list[Child], stack: AsyncExitStack,
) -> None:
    """SIGSTOP, not SIGKILL: the owner is frozen with turns in hand; another node takes the chat
    over and runs them; thawed, the old owner goes on with its batch, and the fencing token
    refuses each of its commits. Every message is stored once, in order."""
    async with PgStore(pg_url, min_size=1, max_size=2) as setup:
        await setup.write(create_ran_table)
    owner = await spawn(pg_url, "owner", lanes="chat:p", pause=0.1)
    children.append(owner)
    await owner.wait_for("lane", "chat:p")
    events = Events()
    edge, store = await start_node(stack, pg_url, "edge", events, failover_s=2.0, roles=(), runner=True)
    claim = await edge.claim_lane("chat:p")
    assert claim.owner == "owner"
    total = 40
    for i in range(total):
        await store.write(edge.hand_off("chat:p", f"m{i}", claim.owner))
    async with asyncio.timeout(60):
        while sum(1 for r in await store.read(ran_rows) if r[3] == "owner") < 5:
            await asyncio.sleep(0.02)
    owner.proc.send_signal(signal.SIGSTOP)
    try:
        async with asyncio.timeout(120):
            while len(await store.read(ran_rows)) < total:
                await asyncio.sleep(0.05)
    finally:
        owner.proc.send_signal(signal.SIGCONT)
    try:
        await owner.wait_for("lane_lost", "chat:p")  # it tried, and the fence said no
    finally:
        rows = await store.read(ran_rows)
        assert len(rows) == total, f"a turn stored twice: {len(rows)} rows for {total} messages"
    assert [r[2] for r in rows] == [f"m{i}" for i in range(total)]
    by = [r[3] for r in rows]
    assert by == ["owner"] * by.count("owner") + ["edge"] * by.count("edge") and by[-1] == "edge"
