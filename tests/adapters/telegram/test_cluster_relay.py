"""A reply made on a node that does not poll Telegram reaches the chat through the node that does
(README, "Running several nodes"): three real daemon processes over one real PostgreSQL server;
the scheduler role's holder is not the poller, and a scheduled job's answer for a Telegram chat
is relayed through the delivery ledger and sent by the poller, once, as it would have been sent
(not marked "recovered after a restart")."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from gateway.control.client import call
from storage.postgres import PgStore
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._telegram_process import telegram_daemon, until
from ._cluster import NODES, RECOVERED, answers, pollers, wait_cluster
from .test_cluster_cron import CRON, _eventually, _runs, _schedulers


async def _ledger(pg_url: str) -> list[tuple[str, str]]:
    async with PgStore(pg_url, min_size=1, max_size=1) as store:
        rows = await store.read(lambda c: c.execute("SELECT platform, status FROM gateway_outbound ORDER BY id").fetchall())
    return [(str(r[0]), str(r[1])) for r in rows]


async def test_a_scheduled_answer_made_on_a_node_that_does_not_poll_reaches_the_chat_once(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    fake, uid = fake_telegram, fake_telegram.user["id"]
    async with AsyncExitStack() as stack:
        # n1 polls and never runs scheduled jobs (its cron is off): it starts alone and takes Telegram
        await stack.enter_async_context(telegram_daemon(
            tmp_path / "n1", fake, fake_openai, storage={"url": pg_url},
            cluster={"node_id": "n1", "failover_s": 3}, cron={**CRON, "enabled": False}))
        await wait_cluster(tmp_path / "n1", "n1 to poll", lambda v: pollers(v) == ["n1"])
        await until(fake.connected, "n1 to poll")
        for node in NODES[1:]:
            await stack.enter_async_context(telegram_daemon(
                tmp_path / node, fake, fake_openai, storage={"url": pg_url},
                cluster={"node_id": node, "failover_s": 3}, cron=CRON))

        def settled(v: dict[str, Any]) -> bool:
            alive = sorted(n["node_id"] for n in v["nodes"] if n["alive"])
            return alive == list(NODES) and len(_schedulers(v)) == 1 and pollers(v) == ["n1"]

        view = await wait_cluster(tmp_path / "n1", "three nodes, n1 polling, another scheduling", settled)
        sched = _schedulers(view)[0]
        assert sched != "n1"

        await call(tmp_path / sched, "cron.add", {"name": "relayed", "schedule": "in 1s", "prompt": "Tick",
                                                  "deliver": f"telegram:{uid}"})

        async def sent_and_marked() -> bool:
            return await _ledger(pg_url) == [("telegram", "sent")]

        await _eventually(sent_and_marked, "the scheduled answer to be sent and marked")
        runs = await _runs(pg_url)
        assert [(r[1], r[2]) for r in runs] == [("ok", f"hermes-gateway/{sched}")]  # run where no poller is
        said = answers(fake, uid)
        assert said == ["⏰ relayed\n\necho: Tick"]  # once, as it would have been sent
        assert not said[0].startswith(RECOVERED)
