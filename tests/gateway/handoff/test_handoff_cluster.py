"""/handoff on several nodes: two real daemon processes (``hermes-gateway run``) over one real
PostgreSQL server and one FakeDiscord. One node holds Discord's gateway connection (the
``discord`` role); ``/handoff discord`` reaches the other through its HTTP API. The node
connected to Discord opens the thread and runs the summary turn there; the node the request
came through answers it with the outcome, once; while a reply is being written on another
node, the /handoff is refused. With no node connected to Discord the row is
never claimed: the pending timeout fails it and the person is told why; meanwhile every node
refuses the chat's turns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from adapters.base import ChatType, InboundMessage
from gateway.handoff.job import Job
from gateway.routing.home_channels import HomeChannel
from storage.postgres import PgStore
from storage.postgres import home_channels as pg_home_channels
from tests.adapters._daemon_process import daemon_process
from tests.adapters._telegram_process import QUIET, until
from tests.adapters.conftest import daemon_config, serve_gateway, telegram_config
from tests.adapters.discord.test_adapter import discord_config, in_channel
from tests.adapters.telegram._cluster import answers, wait_cluster
from tests.emulators.fake_discord import FakeDiscord
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port, write_config

NODES = ("n1", "n2")
WAIT = 30.0
SOURCE_KEY = "agent:main:api-server:dm:alice"


@asynccontextmanager
async def discord_node(home: Path, fake: FakeDiscord, model: FakeOpenAI, pg_url: str, node: str, *,
                       env: dict[str, str] | None = None, **sections: dict[str, Any]) -> AsyncIterator[int]:
    """One node: Discord (a role) beside the HTTP API (every node); yields its HTTP port."""
    port = free_port()
    cfg = daemon_config(model.base_url, port, "discord", discord_config(fake),
                        {"agent": QUIET, "gateway": {"busy_ack": False, "typing_delay": 0}, "logging": {"level": "info"},
                         "storage": {"url": pg_url}, "cluster": {"node_id": node, "failover_s": 3}, **sections})
    write_config(home, cfg, {"DISCORD_BOT_TOKEN": fake.token, "DISCORD_ALLOWED_USERS": fake.user["id"], **(env or {})})
    async with daemon_process(home):
        yield port


async def summary_in(fake: FakeDiscord, thread_id: str, pg_url: str) -> str:
    """The summary turn's answer in the new thread, once the handoff is over: one answer, which a
    long echo may split into several messages (Discord's 2000 characters), never two answers."""
    await until_true(lambda: _settled(pg_url), "the handoff to end")

    def texts() -> list[str]:
        """Each message's latest text, in the order they were posted (a streamed answer is posted
        part-written, then edited)."""
        latest: dict[str, str] = {}
        for m in fake.sent:
            if in_channel(thread_id)(m):
                latest[str(m["message_id"])] = str(m["text"])
        return list(latest.values())

    async def whole() -> bool:  # the answer's later parts and edits may still be on their way
        return "was just handed off from" in "".join(texts())

    await until_true(whole, "the whole summary to be posted")
    summary = "".join(texts())
    assert summary.count("was just handed off from") == 1, texts()
    return summary


async def _settled(pg_url: str) -> bool:
    return bool(await db(pg_url, "SELECT 1 FROM gateway_handoffs WHERE state IN ('completed', 'failed')"))


def holders(view: dict[str, Any]) -> list[str]:
    return [n["node_id"] for n in view["nodes"] if n["alive"] and "discord" in n["roles"]]


async def api(port: int, text: str) -> tuple[int, str]:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "user": "alice"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
        resp = await http.post("/v1/chat/completions", json=body)
    if resp.status_code != 200:
        return resp.status_code, resp.text
    return 200, str(resp.json()["choices"][0]["message"]["content"])


async def until_true(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def db(pg_url: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    async with PgStore(pg_url) as store:
        found = await store.read(lambda c: c.execute(sql, params).fetchall())
    return [tuple(r) for r in found]


async def test_handoff_reaching_a_node_without_discord_is_run_by_the_node_connected_to_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord, pg_url: str
) -> None:
    fake, general = fake_discord, fake_discord.general
    async with AsyncExitStack() as stack:
        ports = {node: await stack.enter_async_context(discord_node(tmp_path / node, fake, fake_openai, pg_url, node))
                 for node in NODES}
        view = await wait_cluster(tmp_path / "n1", "two nodes, one connected to Discord", lambda v: (
            len([n for n in v["nodes"] if n["alive"]]) == 2 and len(holders(v)) == 1))
        holder = holders(view)[0]
        other = next(n for n in NODES if n != holder)
        await until(fake.connected, "a node to connect to Discord")
        await fake.user_says("/sethome", chat=general, mention=True)
        [ack] = await fake.wait_sent(1, timeout=WAIT, match=in_channel(general))
        assert "Home channel of discord set" in ack["text"]

        assert await api(ports[other], "remember seven") == (200, "echo: remember seven")
        [(sid,)] = await db(pg_url, "SELECT session_id FROM gateway_session_index WHERE session_key = %s", SOURCE_KEY)
        await api(ports[other], "/title Seven")

        # a reply still being written on the connected node: the other node refuses the /handoff
        hold = fake_openai.hold_when(lambda body: "slow one" in str(body))
        slow = asyncio.create_task(api(ports[holder], "slow one"))
        await asyncio.wait_for(hold.arrived.wait(), WAIT)
        status, busy = await api(ports[other], "/handoff discord")
        assert "A reply is still being written" in busy, (status, busy)
        hold.release.set()
        assert await slow == (200, "echo: slow one")
        assert fake.threads == [] and await db(pg_url, "SELECT id FROM gateway_handoffs") == []

        async def lane_free() -> bool:
            return not await db(pg_url, "SELECT 1 FROM cluster_leases WHERE kind = 'lane' AND name = %s"
                                " AND expires_at > extract(epoch from now())", SOURCE_KEY)

        await until_true(lane_free, "the connected node to let the chat go (its lane ran dry)")
        status, done = await api(ports[other], "/handoff discord")  # at the node NOT connected to Discord

        assert status == 200, done
        assert done.startswith("Handoff complete: handed off to discord.") and done.endswith("/resume Seven"), done
        [thread] = fake.threads  # opened once, by the connected node
        assert thread["parent_id"] == general and thread["name"] == "Hermes — Seven"
        await fake.wait_sent(1, timeout=WAIT, match=in_channel(thread["id"]))
        summary = await summary_in(fake, thread["id"], pg_url)
        assert summary.startswith('echo: [This session ("Seven") was just handed off from api-server')
        [(state, target_key)] = await db(pg_url, "SELECT state, target_key FROM gateway_handoffs")
        assert (state, target_key) == ("completed", f"agent:main:discord:group:{general}:{thread['id']}")
        assert await db(pg_url, "SELECT session_id FROM gateway_session_index WHERE session_key = %s",
                        target_key) == [(sid,)]
        assert await db(pg_url, "SELECT session_id FROM gateway_session_index WHERE session_key = %s",
                        SOURCE_KEY) == []
        # the connected node ran it; the requester only told the source
        assert "handoff.taken" in (tmp_path / holder / "daemon.log").read_text()
        requester_log = (tmp_path / other / "daemon.log").read_text()
        assert "handoff.completed_elsewhere" in requester_log and "handoff.taken" not in requester_log
        # the source chat carries on with a fresh session, on either node
        assert await api(ports[holder], "hello again") == (200, "echo: hello again")
        [(fresh,)] = await db(pg_url, "SELECT session_id FROM gateway_session_index WHERE session_key = %s",
                              SOURCE_KEY)
        assert fresh != sid
        await asyncio.sleep(1.0)  # a second claim or send would show now
        assert len(fake.threads) == 1
        assert len([m for m in fake.sent if in_channel(thread["id"])(m)]) == 1


async def test_handoff_with_no_node_connected_to_the_target_fails_at_the_timeout_and_says_why(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord, pg_url: str
) -> None:
    fake = fake_discord
    fake.message_content_allowed = False  # every IDENTIFY is closed with 4014: nobody connects
    async with PgStore(pg_url) as store:
        await store.write(lambda c: pg_home_channels.put(c, "discord", chat_id=str(fake.general), thread_id=None,
                                                         chat_type="group", set_by=str(fake.user["id"]), now=1.0))
    async with AsyncExitStack() as stack:
        ports = {node: await stack.enter_async_context(discord_node(
            tmp_path / node, fake, fake_openai, pg_url, node, sessions={"handoff_timeout_seconds": 4}))
            for node in NODES}
        await wait_cluster(tmp_path / "n1", "two nodes, the discord role held", lambda v: (
            len([n for n in v["nodes"] if n["alive"]]) == 2 and len(holders(v)) == 1))
        await until(lambda: len(fake.identifies) >= 1, "a node to try Discord")
        assert await api(ports["n1"], "remember seven") == (200, "echo: remember seven")

        handoff = asyncio.create_task(api(ports["n1"], "/handoff discord"))

        async def pending() -> bool:
            assert not handoff.done(), handoff.result()
            return bool(await db(pg_url, "SELECT 1 FROM gateway_handoffs WHERE state = 'pending'"))

        await until_true(pending, "the handoff's pending row")
        # meanwhile the chat is held on every node, not only the one that took the command
        status, refused = await api(ports["n2"], "a turn during the handoff")
        assert "being handed off to discord" in refused, (status, refused)

        status, failed = await handoff
        assert status == 200, failed
        assert failed.startswith("Handoff failed: no gateway node connected to discord picked it up in time"), failed
        assert "Your session here is intact; try /handoff discord again." in failed
        assert await db(pg_url, "SELECT state FROM gateway_handoffs") == [("failed",)]
        assert fake.threads == []
        # the chat is free again, still on its session
        assert await api(ports["n2"], "and now?") == (200, "echo: and now?")


async def test_handoff_from_telegram_on_one_node_to_discord_on_the_other(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    """The source is a polling platform: n1 polls Telegram (only n1 has it configured) and n2
    holds Discord's connection (both want it; n2 took it before n1 started). The person's
    /handoff comes through n1's poller; n2 moves the session; n1 tells the Telegram chat."""
    fake, tg, general = fake_discord, fake_telegram, fake_discord.general
    chat = int(tg.user["id"])
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(discord_node(tmp_path / "n2", fake, fake_openai, pg_url, "n2"))
        await wait_cluster(tmp_path / "n2", "n2 connected to Discord", lambda v: holders(v) == ["n2"])
        await until(fake.connected, "n2 to connect to Discord")
        await stack.enter_async_context(discord_node(
            tmp_path / "n1", fake, fake_openai, pg_url, "n1", platforms={"telegram": telegram_config(tg)},
            env={"TELEGRAM_BOT_TOKEN": tg.token, "TELEGRAM_ALLOWED_USERS": str(tg.user["id"])}))
        view = await wait_cluster(tmp_path / "n1", "n1 polling Telegram", lambda v: (
            [n["node_id"] for n in v["nodes"] if n["alive"] and "telegram" in n["roles"]] == ["n1"]))
        assert holders(view) == ["n2"]
        await until(tg.connected, "n1 to poll Telegram")
        await fake.user_says("/sethome", chat=general, mention=True)
        [ack] = await fake.wait_sent(1, timeout=WAIT, match=in_channel(general))
        assert "Home channel of discord set" in ack["text"]

        await tg.user_says("remember seven")
        await until(lambda: "echo: remember seven" in answers(tg, chat), "the first answer")
        await tg.user_says("/handoff discord")
        await until(lambda: any(t.startswith("Handoff ") for t in answers(tg, chat)), "the handoff's outcome")

        [thread] = fake.threads
        await fake.wait_sent(1, timeout=WAIT, match=in_channel(thread["id"]))
        summary = await summary_in(fake, thread["id"], pg_url)
        assert summary.startswith("echo: [This session (") and "from telegram" in summary
        await asyncio.sleep(1.0)  # a second outcome, thread or summary would show now
        outcomes = [t for t in answers(tg, chat) if t.startswith("Handoff ")]
        assert len(outcomes) == 1 and outcomes[0].startswith("Handoff complete: handed off to discord."), outcomes
        assert len(fake.threads) == 1
        assert len([m for m in fake.sent if in_channel(thread["id"])(m)]) == 1
        assert await db(pg_url, "SELECT state FROM gateway_handoffs") == [("completed",)]
        assert "handoff.taken" in (tmp_path / "n2" / "daemon.log").read_text()


async def test_an_outcome_this_node_cannot_send_goes_through_the_ledger_to_the_connected_node(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord, pg_url: str
) -> None:
    """The requester lost the source platform's connection while it waited (its role moved): it
    relays the outcome through the delivery ledger, and the node connected to the platform sends
    it (once, as it would have been sent: not as a recovered reply). n2 is a real process holding Discord; n1 runs
    in this process, Discord in standby there, and tells a Discord chat the outcome."""
    fake, general = fake_discord, fake_discord.general
    async with discord_node(tmp_path / "n2", fake, fake_openai, pg_url, "n2"):
        await wait_cluster(tmp_path / "n2", "n2 connected to Discord", lambda v: holders(v) == ["n2"])
        await until(fake.connected, "n2 to connect to Discord")
        cfg = daemon_config(fake_openai.base_url, free_port(), "discord", discord_config(fake),
                            {"agent": QUIET, "storage": {"url": pg_url},
                             "cluster": {"node_id": "n1", "failover_s": 3}})
        env = {"DISCORD_BOT_TOKEN": fake.token, "DISCORD_ALLOWED_USERS": fake.user["id"]}
        async with serve_gateway(tmp_path / "n1", cfg, env, "discord", ("standby",)) as (gw, _):
            runner = gw.runtime.handoffs if gw.runtime is not None else None
            assert runner is not None and runner.remote("discord")  # n1 is not connected to Discord
            source = InboundMessage(platform="discord", chat_id=str(general), chat_type=ChatType.GROUP,
                                    user_id=str(fake.user["id"]), text="/handoff telegram", message_id="1")
            home = HomeChannel("telegram", "42", None, ChatType.DM, "7", 0.0)
            job = Job(1, "s", source, "agent:main:discord:group:x", "telegram", home)
            await runner._tell_source_from_here(job, "Handoff complete: handed off to telegram.")
            [row] = await db(pg_url, "SELECT platform, chat_id, status FROM gateway_outbound")
            assert row[:2] == ("discord", str(general))
            sent = await fake.wait_sent(1, timeout=WAIT, match=lambda m: "Handoff complete" in str(m.get("text")))
            assert sent[0]["chat_id"] == str(general)
            assert sent[0]["text"] == "Handoff complete: handed off to telegram."
            await asyncio.sleep(1.0)  # sent once: a second send would show now
            assert len([m for m in fake.sent if "Handoff complete" in str(m.get("text"))]) == 1
            assert [r[0] for r in await db(pg_url, "SELECT status FROM gateway_outbound")] == ["sent"]
