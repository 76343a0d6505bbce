"""Three real daemon processes over one real PostgreSQL server: a chat's turns run on one node at
a time. A webhook update at a node that does not serve the chat is answered by its owner; an
HTTP API request there waits for the chat; a node paused past its lease cannot store its answer."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

from storage.postgres import PgStore
from tests.adapters.conftest import telegram_config
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port

from .._telegram_process import telegram_daemon, until
from ._cluster import NODES, delivered, stored, wait_cluster


async def webhook_nodes(stack: AsyncExitStack, tmp_path: Path, fake: FakeTelegram, model: FakeOpenAI,
                        pg_url: str) -> tuple[dict[str, int], dict[str, subprocess.Popen[bytes]], str, str]:
    """Three live nodes with Telegram in webhook mode, each its own URL: (HTTP ports, processes,
    the node whose URL Telegram posts to, another node)."""
    ports = {node: free_port() for node in NODES}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for node in NODES:
        telegram = telegram_config(fake, mode="webhook", require_mention=False,
                                   webhook_url=f"http://127.0.0.1:{ports[node]}/telegram/webhook",
                                   webhook_secret="s3cret-for-the-cluster-test")
        procs[node] = await stack.enter_async_context(telegram_daemon(
            tmp_path / node, fake, model, logging={"level": "info"},
            platforms={"api_server": {"port": ports[node]}, "telegram": telegram},
            storage={"url": pg_url}, cluster={"node_id": node, "failover_s": 3}))
    await wait_cluster(tmp_path / "n1", "three live nodes", lambda v: (
        len([n for n in v["nodes"] if n["alive"]]) == 3))
    await until(lambda: fake.webhook is not None, "a webhook set")
    hook = fake.webhook
    assert hook is not None
    owner = next(n for n in NODES if f":{ports[n]}/" in hook["url"])
    return ports, procs, owner, next(n for n in NODES if n != owner)


async def test_a_webhook_update_at_a_node_that_does_not_serve_the_chat_is_answered_by_its_owner(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    fake, uid = fake_telegram, fake_telegram.user["id"]
    hold = fake_openai.hold_when(lambda body: "first" in str(body["messages"][-1]))
    async with AsyncExitStack() as stack:
        ports, _, owner, other = await webhook_nodes(stack, tmp_path, fake, fake_openai, pg_url)

        first = await fake.user_says("first")  # posted to the owner's URL: its turn holds the chat
        await until(hold.arrived.is_set, "the first turn at the model")
        second = {**first, "update_id": first["update_id"] + 1000,
                  "message": {**first["message"], "message_id": first["message"]["message_id"] + 1000,
                              "text": "second"}}
        url = f"http://127.0.0.1:{ports[other]}/telegram/webhook"
        assert await fake.deliver_to_webhook(second, url=url) == 200
        # a copy of the first update reaching the other node too (a proxy's retry): seen already
        # (the owner recorded it with its turn's question), it is dropped there
        assert await fake.deliver_to_webhook(first, url=url) == 200
        async with PgStore(pg_url) as store:
            async def inbox() -> list[tuple[Any, ...]]:
                found = await store.read(lambda c: c.execute(
                    "SELECT from_node, done_at IS NOT NULL FROM cluster_inbox ORDER BY id").fetchall())
                return [tuple(r) for r in found]

            handed: list[tuple[Any, ...]] = []

            async def wait_handed() -> None:
                while len(found := await inbox()) < 2:
                    await asyncio.sleep(0.1)
                handed.extend(found)

            await asyncio.wait_for(wait_handed(), 30)
            # the owner's own parked row for the first (until it is answered), then the second,
            # written by the node it reached, for the owner
            assert handed == [(owner, False), (other, False)]
            hold.release.set()
            await until(lambda: "second" in [t for _, t in delivered(fake)], "the second answer")
            async with asyncio.timeout(10):
                while await inbox() != [(owner, True), (other, True)]:
                    await asyncio.sleep(0.1)
    answers_ = [t for c, t in delivered(fake) if c == uid]
    assert answers_ == ["first", "second"]  # once each, in order
    assert [(role, content) for _, role, content in await stored(pg_url)] == [
        ("user", "first"), ("assistant", "echo: first"), ("user", "second"), ("assistant", "echo: second")]


async def test_an_http_api_request_at_another_node_waits_for_the_chat_and_keeps_its_order(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    hold = fake_openai.hold_when(lambda body: "slow one" in str(body["messages"][-1]))
    ports = {node: free_port() for node in NODES}
    async with AsyncExitStack() as stack:
        for node in NODES:
            await stack.enter_async_context(telegram_daemon(
                tmp_path / node, fake_telegram, fake_openai,
                platforms={"api_server": {"port": ports[node]}, "telegram": telegram_config(fake_telegram)},
                storage={"url": pg_url}, cluster={"node_id": node, "failover_s": 3}))
        await wait_cluster(tmp_path / "n1", "three live nodes", lambda v: (
            len([n for n in v["nodes"] if n["alive"]]) == 3))
        client = await stack.enter_async_context(httpx.AsyncClient(timeout=60))

        async def ask(node: str, text: str) -> httpx.Response:
            return await client.post(f"http://127.0.0.1:{ports[node]}/v1/chat/completions",
                                     json={"messages": [{"role": "user", "content": text}], "user": "alice"})

        async def ready(node: str) -> bool:
            try:
                return (await client.get(f"http://127.0.0.1:{ports[node]}/readyz")).status_code == 200
            except httpx.TransportError:
                return False

        for node in NODES:
            while not await ready(node):
                await asyncio.sleep(0.1)
        slow = asyncio.create_task(ask("n1", "slow one"))
        await until(hold.arrived.is_set, "the first turn at the model")
        following = asyncio.create_task(ask("n2", "next one"))  # n1 serves alice's chat now
        view = await wait_cluster(tmp_path / "n2", "n1 serving a chat", lambda v: any(
            n["node_id"] == "n1" and n["lanes"] == 1 for n in v["nodes"]))
        assert view["this_node"]["lanes"] == 0  # n2 waits for the chat; it does not run it beside n1
        hold.release.set()
        first, second = await slow, await following
        assert (first.status_code, second.status_code) == (200, 200), (first.text, second.text)
        assert second.json()["choices"][0]["message"]["content"] == "echo: next one"
    assert [(role, content) for _, role, content in await stored(pg_url)] == [
        ("user", "slow one"), ("assistant", "echo: slow one"), ("user", "next one"), ("assistant", "echo: next one")]


async def test_a_node_paused_past_its_lease_cannot_store_its_answer_beside_the_new_owner(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    fake, uid = fake_telegram, fake_telegram.user["id"]
    held: list[bool] = []

    def owners_first_call(body: dict[str, Any]) -> bool:  # the paused node's; not the new owner's
        if "first" in str(body["messages"][-1]) and not held:
            held.append(True)
            return True
        return False

    hold = fake_openai.hold_when(owners_first_call)
    paused: list[int] = []
    async with AsyncExitStack() as stack:
        ports, procs, owner, other = await webhook_nodes(stack, tmp_path, fake, fake_openai, pg_url)

        def resume_paused() -> None:
            for pid in paused:
                os.kill(pid, signal.SIGCONT)

        stack.callback(resume_paused)
        store = await stack.enter_async_context(PgStore(pg_url))

        async def lane_holder() -> str | None:
            row = await store.read(lambda c: c.execute(
                "SELECT node_id FROM cluster_leases WHERE kind = 'lane' AND expires_at > "
                "extract(epoch from now())").fetchone())
            return None if row is None else str(row[0])

        first = await fake.user_says("first")
        await until(hold.arrived.is_set, "the first turn at the model")
        assert await lane_holder() == owner
        os.kill(procs[owner].pid, signal.SIGSTOP)  # paused mid-turn: its lease runs out
        paused.append(procs[owner].pid)
        while await lane_holder() == owner:
            await asyncio.sleep(0.1)
        second = {**first, "update_id": first["update_id"] + 1000,
                  "message": {**first["message"], "message_id": first["message"]["message_id"] + 1000,
                              "text": "second"}}
        assert await fake.deliver_to_webhook(second, url=f"http://127.0.0.1:{ports[other]}/telegram/webhook") == 200
        await until(lambda: "second" in [t for _, t in delivered(fake)], "the new owner's answers")
        os.kill(procs[owner].pid, signal.SIGCONT)  # it wakes up and its model call returns
        paused.clear()
        hold.release.set()

        log = tmp_path / owner / "daemon.log"
        # the paused node's answer was refused by the lane's fence (its transaction rolled back),
        # and that node says nothing to the chat: the new owner answered, the first message too (the
        # paused node's parked row, taken over with the chat, its stored question answered once)
        await until(lambda: "router.lane_lost" in log.read_text(), "the paused node's turn to end")
        # and it leaves the message's row to the new owner: it does not mark it done
        await until(lambda: "router.parked_left_to_new_owner" in log.read_text(), "the paused node to let go")
    stored_ = [(role, content) for _, role, content in await stored(pg_url)]
    assert stored_ == [("user", "first"), ("assistant", "echo: first"), ("user", "second"),
                       ("assistant", "echo: second")], stored_
    assert [t for c, t in delivered(fake) if c == uid] == ["first", "second"]
    assert [m for m in fake.sent if int(m["chat_id"]) == uid and "echo: " not in str(m.get("text"))
            and "Queued" not in str(m.get("text"))] == []  # the second waited behind the first there
