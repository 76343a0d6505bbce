"""Three real daemon processes (``hermes-gateway run``) over one real PostgreSQL server and one
FakeTelegram bot in polling mode: one node at a time polls (the ``telegram`` role), ``status``
lists the nodes, and ``kill -9`` of the polling node hands the role to another, which answers
the next messages; no message is answered twice, none is lost."""

from __future__ import annotations

import asyncio
import subprocess
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from gateway.control.client import call
from gateway.errors import ControlError
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._telegram_process import telegram_daemon, until

NODES = ("n1", "n2", "n3")


async def status(home: Path) -> dict[str, Any] | None:
    try:
        return await call(home, "status", reply_within=5)
    except (ControlError, OSError):
        return None


async def cluster_of(home: Path) -> dict[str, Any]:
    st = await status(home)
    return dict(st.get("cluster") or {}) if st is not None else {}


async def wait_cluster(home: Path, what: str, check: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def poll() -> bool:
        seen.clear()
        seen.update(await cluster_of(home))
        return bool(seen) and bool(check(seen))

    async def loop() -> None:
        while not await poll():
            await asyncio.sleep(0.2)

    task = asyncio.create_task(loop())
    try:
        await until(task.done, what)
    finally:
        task.cancel()
    return seen


def pollers(view: dict[str, Any]) -> list[str]:
    return [n["node_id"] for n in view["nodes"] if n["alive"] and "telegram" in n["roles"]]


def answers(fake: FakeTelegram, chat_id: int) -> list[str]:
    return [str(m.get("rendered") or m["text"]) for m in fake.sent if m["chat_id"] == chat_id]


async def test_three_nodes_one_poller_and_kill_9_of_it_moves_the_role(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    fake, uid = fake_telegram, fake_telegram.user["id"]
    async with AsyncExitStack() as stack:
        procs: dict[str, subprocess.Popen[bytes]] = {}
        for node in NODES:
            procs[node] = await stack.enter_async_context(telegram_daemon(
                tmp_path / node, fake, fake_openai,
                storage={"url": pg_url}, cluster={"node_id": node, "failover_s": 3}))
        home = tmp_path / "n1"
        view = await wait_cluster(home, "three live nodes, one polling", lambda v: (
            sorted(n["node_id"] for n in v["nodes"] if n["alive"]) == list(NODES) and len(pollers(v)) == 1))
        assert view["database"] == "up"
        holder = pollers(view)[0]
        assert {"ledger", "maintenance"} <= {r for n in view["nodes"] for r in n["roles"]}
        for node in NODES:  # every node's status shows the same cluster
            other = await wait_cluster(tmp_path / node, f"{node}'s view", lambda v: len(pollers(v)) == 1)
            assert pollers(other) == [holder]
            assert other["node_id"] == node

        await until(fake.connected, "a node to poll")
        await fake.user_says("before the kill")
        await until(lambda: "echo: before the kill" in answers(fake, uid), "the first answer")

        procs[holder].kill()
        await asyncio.to_thread(procs[holder].wait, 30)
        survivor = next(n for n in NODES if n != holder)
        view = await wait_cluster(tmp_path / survivor, "another node to poll", lambda v: (
            pollers(v) and holder not in pollers(v)))
        assert len(pollers(view)) == 1
        await fake.user_says("after the kill")
        await until(lambda: "echo: after the kill" in answers(fake, uid), "the answer after the kill")
        await fake.user_says("and once more")
        await until(lambda: "echo: and once more" in answers(fake, uid), "the third answer")

    said = [t for t in answers(fake, uid) if t.startswith("echo: ")]
    assert said == ["echo: before the kill", "echo: after the kill", "echo: and once more"]  # once each, in order
