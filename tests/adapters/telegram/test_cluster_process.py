"""Three real daemon processes (``hermes-gateway run``) over one real PostgreSQL server and one
FakeTelegram bot in polling mode: one node at a time polls (the ``telegram`` role), ``status``
lists the nodes, and ``kill -9`` of the polling node hands the role to another, which answers
the next messages; no message is answered twice, none is lost."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from gateway.control.client import call
from gateway.errors import ControlError
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.pg.server import PgServer

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


RECOVERED = "↻ (recovered after a restart) "


def delivered(fake: FakeTelegram) -> list[tuple[int, str]]:
    """(chat, answer) for each answer the bot sent, the recovery prefix taken off."""
    out = []
    for m in fake.sent:
        text = str(m.get("rendered") or m.get("text") or "").removeprefix(RECOVERED)
        if text.startswith("echo: "):
            out.append((int(m["chat_id"]), text.removeprefix("echo: ")))
    return out


async def stored(pg_url: str) -> list[tuple[str, str, str]]:
    """(session, role, content) of every stored message, in the order they were stored."""
    from storage.postgres import PgStore

    async with PgStore(pg_url) as store:
        found = await store.read(lambda c: c.execute(
            "SELECT session_id, role, content FROM messages ORDER BY id").fetchall())
    return [(str(r[0]), str(r[1]), str(r[2])) for r in found]


async def test_kill_9_of_the_node_serving_busy_chats_loses_no_answer_and_sends_none_twice(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    fake = fake_telegram
    users = [fake.user, *(fake.add_user(f"U{i}") for i in range(3))]
    chats = [fake.private_chat(u) for u in users]
    for _ in range(200):
        fake_openai.delay(0.15)  # turns take a while: the kill finds some under way, some waiting
    sent: dict[int, list[str]] = {int(c["id"]): [] for c in chats}

    async def say(round_: int) -> None:
        for i, chat in enumerate(chats):
            text = f"c{i}-m{round_}"
            sent[int(chat["id"])].append(text)
            await fake.user_says(text, chat=chat, user=users[i])

    async with AsyncExitStack() as stack:
        procs: dict[str, subprocess.Popen[bytes]] = {}
        for node in NODES:
            procs[node] = await stack.enter_async_context(telegram_daemon(
                tmp_path / node, fake, fake_openai, auth={"allow_all_users": True}, logging={"level": "info"},
                storage={"url": pg_url}, cluster={"node_id": node, "failover_s": 3}))
        view = await wait_cluster(tmp_path / "n1", "three nodes, one polling", lambda v: (
            len([n for n in v["nodes"] if n["alive"]]) == 3 and len(pollers(v)) == 1))
        holder = pollers(view)[0]
        await until(fake.connected, "a node to poll")
        for round_ in range(3):
            await say(round_)
        await until(lambda: len(delivered(fake)) >= 2, "the first answers")
        procs[holder].kill()  # answers under way, turns waiting in its lanes
        await asyncio.to_thread(procs[holder].wait, 30)
        for round_ in range(3, 5):
            await say(round_)
        survivor = next(n for n in NODES if n != holder)
        await wait_cluster(tmp_path / survivor, "another node to poll", lambda v: (
            pollers(v) and holder not in pollers(v)))
        after = {f"c{i}-m{r}" for i in range(len(chats)) for r in range(3, 5)}
        try:
            await until(lambda: after <= {t for _, t in delivered(fake)}, "every message after the kill answered")
        except AssertionError:
            missing = after - {t for _, t in delivered(fake)}
            from storage.postgres import PgStore

            async with PgStore(pg_url) as store:
                ledger = await store.read(lambda c: c.execute(
                    "SELECT id, status, error, text, created_at FROM gateway_outbound ORDER BY id").fetchall())
            raise AssertionError(f"not answered: {sorted(missing)}; stored: {await stored(pg_url)}; "
                                 f"ledger: {[tuple(r) for r in ledger]}; sent: {fake.sent}") from None

        async def all_answers_out() -> bool:
            answered = {c.removeprefix("echo: ") for _, role, c in await stored(pg_url) if role == "assistant"}
            return answered <= {t for _, t in delivered(fake)}

        done = asyncio.Event()

        async def watch() -> None:
            while not await all_answers_out():
                await asyncio.sleep(0.2)
            done.set()

        watcher = asyncio.create_task(watch())
        try:
            # an answer the dead node stored but had not sent goes out from the node that took over
            await until(done.is_set, "every stored answer delivered")
        finally:
            watcher.cancel()

    out = delivered(fake)
    texts = [t for _, t in out]
    assert len(texts) == len(set(texts)), f"an answer went out twice: {texts}"
    for chat_id, chat_texts in sent.items():
        got = [t for c, t in out if c == chat_id]
        assert set(got) <= set(chat_texts)  # nothing went to the wrong chat
    # order per chat: each session stores its questions in the order they were sent, each answer
    # right after its question
    rows = await stored(pg_url)
    by_session: dict[str, list[tuple[str, str]]] = {}
    for session, role, content in rows:
        by_session.setdefault(session, []).append((role, content))
    for messages in by_session.values():
        questions = [c for r, c in messages if r == "user"]
        chat = questions[0].split("-")[0]
        assert all(q.startswith(chat + "-") for q in questions)
        assert questions == sorted(questions, key=lambda q: int(q.split("-m")[1])), questions
        for (r1, c1), (r2, c2) in itertools.pairwise(messages):
            if r2 == "assistant":
                assert (r1, c2) == ("user", f"echo: {c1}"), messages


async def test_a_webhook_update_at_a_node_that_does_not_serve_the_chat_is_answered_by_its_owner(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    from storage.postgres import PgStore
    from tests.adapters.conftest import telegram_config
    from tests.gateway.conftest import free_port

    fake, uid = fake_telegram, fake_telegram.user["id"]
    hold = fake_openai.hold_when(lambda body: "first" in str(body["messages"][-1]))
    ports = {node: free_port() for node in NODES}
    async with AsyncExitStack() as stack:
        for node in NODES:
            telegram = telegram_config(fake, mode="webhook", require_mention=False,
                                       webhook_url=f"http://127.0.0.1:{ports[node]}/telegram/webhook",
                                       webhook_secret="s3cret-for-the-cluster-test")
            await stack.enter_async_context(telegram_daemon(
                tmp_path / node, fake, fake_openai, logging={"level": "info"},
                platforms={"api_server": {"port": ports[node]}, "telegram": telegram},
                storage={"url": pg_url}, cluster={"node_id": node, "failover_s": 3}))
        await wait_cluster(tmp_path / "n1", "three live nodes", lambda v: (
            len([n for n in v["nodes"] if n["alive"]]) == 3))
        await until(lambda: fake.webhook is not None, "a webhook set")
        hook = fake.webhook
        assert hook is not None
        owner = next(n for n in NODES if f":{ports[n]}/" in hook["url"])
        other = next(n for n in NODES if n != owner)

        first = await fake.user_says("first")  # posted to the owner's URL: its turn holds the chat
        await until(hold.arrived.is_set, "the first turn at the model")
        second = {**first, "update_id": first["update_id"] + 1000,
                  "message": {**first["message"], "message_id": first["message"]["message_id"] + 1000,
                              "text": "second"}}
        status = await fake.deliver_to_webhook(second, url=f"http://127.0.0.1:{ports[other]}/telegram/webhook")
        assert status == 200
        async with PgStore(pg_url) as store:
            async def inbox() -> list[tuple[Any, ...]]:
                found = await store.read(lambda c: c.execute(
                    "SELECT from_node, done_at IS NOT NULL FROM cluster_inbox ORDER BY id").fetchall())
                return [tuple(r) for r in found]

            handed: list[tuple[Any, ...]] = []

            async def wait_handed() -> None:
                while not (found := await inbox()):
                    await asyncio.sleep(0.1)
                handed.extend(found)

            await asyncio.wait_for(wait_handed(), 30)
            assert handed[0][0] == other  # written by the node it reached, for the owner
            hold.release.set()
            await until(lambda: "second" in [t for _, t in delivered(fake)], "the second answer")
            assert await inbox() == [(other, True)]
    answers_ = [t for c, t in delivered(fake) if c == uid]
    assert answers_ == ["first", "second"]  # once each, in order
    assert [(role, content) for _, role, content in await stored(pg_url)] == [
        ("user", "first"), ("assistant", "echo: first"), ("user", "second"), ("assistant", "echo: second")]


async def test_an_http_api_request_at_another_node_waits_for_the_chat_and_keeps_its_order(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    import httpx

    from tests.adapters.conftest import telegram_config
    from tests.gateway.conftest import free_port

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
    import os
    import signal

    from storage.postgres import PgStore
    from tests.adapters.conftest import telegram_config
    from tests.gateway.conftest import free_port

    fake, uid = fake_telegram, fake_telegram.user["id"]
    hold = fake_openai.hold_when(lambda body: "first" in str(body["messages"][-1]))
    ports = {node: free_port() for node in NODES}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    paused: list[int] = []
    async with AsyncExitStack() as stack:
        for node in NODES:
            telegram = telegram_config(fake, mode="webhook", require_mention=False,
                                       webhook_url=f"http://127.0.0.1:{ports[node]}/telegram/webhook",
                                       webhook_secret="s3cret-for-the-cluster-test")
            procs[node] = await stack.enter_async_context(telegram_daemon(
                tmp_path / node, fake, fake_openai, logging={"level": "info"},
                platforms={"api_server": {"port": ports[node]}, "telegram": telegram},
                storage={"url": pg_url}, cluster={"node_id": node, "failover_s": 3}))
        def resume_paused() -> None:
            for pid in paused:
                os.kill(pid, signal.SIGCONT)

        stack.callback(resume_paused)
        await wait_cluster(tmp_path / "n1", "three live nodes", lambda v: (
            len([n for n in v["nodes"] if n["alive"]]) == 3))
        await until(lambda: fake.webhook is not None, "a webhook set")
        hook = fake.webhook
        assert hook is not None
        owner = next(n for n in NODES if f":{ports[n]}/" in hook["url"])
        other = next(n for n in NODES if n != owner)
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
        await until(lambda: "second" in [t for _, t in delivered(fake)], "the new owner's answer")
        os.kill(procs[owner].pid, signal.SIGCONT)  # it wakes up and its model call returns
        paused.clear()
        hold.release.set()

        log = tmp_path / owner / "daemon.log"
        # the paused node's answer was refused by the lane's fence (its transaction rolled back)
        await until(lambda: '"error_type": "ChatBusyError"' in log.read_text(), "the paused node's turn to end")
    stored_ = [(role, content) for _, role, content in await stored(pg_url)]
    assert ("assistant", "echo: first") not in stored_, stored_
    assert stored_[-1] == ("assistant", "echo: second")
    assert "first" not in [t for c, t in delivered(fake) if c == uid]


async def test_a_database_restart_mid_load_is_survived(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str, pg_server: PgServer
) -> None:
    fake = fake_telegram
    users = [fake.user, fake.add_user("Bea")]
    chats = [fake.private_chat(u) for u in users]
    for _ in range(100):
        fake_openai.delay(0.1)

    async def say(round_: int) -> set[str]:
        texts = set()
        for i, chat in enumerate(chats):
            texts.add(f"c{i}-r{round_}")
            await fake.user_says(f"c{i}-r{round_}", chat=chat, user=users[i])
        return texts

    async with AsyncExitStack() as stack:
        for node in NODES:
            await stack.enter_async_context(telegram_daemon(
                tmp_path / node, fake, fake_openai, auth={"allow_all_users": True},
                storage={"url": pg_url}, cluster={"node_id": node, "failover_s": 3}))
        await wait_cluster(tmp_path / "n1", "three nodes, one polling", lambda v: (
            len([n for n in v["nodes"] if n["alive"]]) == 3 and len(pollers(v)) == 1))
        await until(fake.connected, "a node to poll")
        before = await say(0)
        await until(lambda: before <= {t for _, t in delivered(fake)}, "the answers before the restart")
        restart = asyncio.create_task(asyncio.to_thread(pg_server.restart))
        during = await say(1)  # may meet the database away: answered once, or refused with a notice
        await restart
        for node in NODES:
            await wait_cluster(tmp_path / node, f"{node} back, one poller", lambda v: (
                v["database"] == "up" and len([n for n in v["nodes"] if n["alive"]]) == 3 and len(pollers(v)) == 1))
        after = await say(2) | await say(3)
        await until(lambda: after <= {t for _, t in delivered(fake)}, "every message after the restart answered")
    texts = [t for _, t in delivered(fake)]
    assert len(texts) == len(set(texts)), f"an answer went out twice: {texts}"
    assert set(texts) <= before | during | after
