"""A reply made on a node that does not poll Telegram reaches the chat through the node that does
(README, "Running several nodes"): three real daemon processes over one real PostgreSQL server,
n1 polling. A scheduled job's answer run on the scheduler role's holder (not n1), and the answer
of a turn run by a non-polling node that owns the chat's lane (an inbox row it adopted), are
relayed through the delivery ledger and sent by n1, once each, as they would have been sent (not
marked "recovered after a restart")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from adapters.base import ChatType, InboundMessage
from gateway.control.client import call
from gateway.routing.parking import to_payload
from storage.postgres import PgConnection, PgStore
from storage.postgres import cluster as pc
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._telegram_process import telegram_daemon, until
from ._cluster import NODES, RECOVERED, answers, pollers, stored, wait_cluster
from .test_cluster_cron import CRON, _eventually, _runs, _schedulers


def _trace_the_ledger(conn: PgConnection) -> None:
    # test-only SQL: every status each ledger row takes, in order (what path the reply took)
    conn.execute("CREATE TABLE ledger_path (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, ledger_id BIGINT,"
                 " status TEXT)")
    conn.execute(
        "CREATE FUNCTION trace_ledger() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status THEN"
        " INSERT INTO ledger_path (ledger_id, status) VALUES (NEW.id, NEW.status); END IF; RETURN NULL; END $$")
    conn.execute("CREATE TRIGGER trace_ledger AFTER INSERT OR UPDATE ON gateway_outbound FOR EACH ROW"
                 " EXECUTE FUNCTION trace_ledger()")


async def _path(pg_url: str) -> list[str]:
    async with PgStore(pg_url, min_size=1, max_size=1) as store:
        rows = await store.read(lambda c: c.execute("SELECT status FROM ledger_path ORDER BY seq").fetchall())
    return [str(r[0]) for r in rows]


#: written where the turn ran, left for the poller, taken by it, sent: never streamed, never failed
RELAYED = ["pending", "relay", "relaying", "sent"]


async def _ledger(pg_url: str) -> list[tuple[str, str]]:
    async with PgStore(pg_url, min_size=1, max_size=1) as store:
        rows = await store.read(lambda c: c.execute("SELECT platform, status FROM gateway_outbound ORDER BY id").fetchall())
    return [(str(r[0]), str(r[1])) for r in rows]


@asynccontextmanager
async def _n1_polls(tmp_path: Path, fake: FakeTelegram, model: FakeOpenAI, pg_url: str) -> AsyncIterator[str]:
    """Three nodes, n1 polling and never scheduling (its cron is off: it starts alone and takes
    Telegram); yields the scheduler role's holder, n2 or n3."""
    async with PgStore(pg_url, min_size=1, max_size=1) as store:
        await store.write(_trace_the_ledger)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(telegram_daemon(
            tmp_path / "n1", fake, model, storage={"url": pg_url},
            cluster={"node_id": "n1", "failover_s": 3}, cron={**CRON, "enabled": False}))
        await wait_cluster(tmp_path / "n1", "n1 to poll", lambda v: pollers(v) == ["n1"])
        await until(fake.connected, "n1 to poll")
        for node in NODES[1:]:
            await stack.enter_async_context(telegram_daemon(
                tmp_path / node, fake, model, storage={"url": pg_url},
                cluster={"node_id": node, "failover_s": 3}, cron=CRON))

        def settled(v: dict[str, Any]) -> bool:
            alive = sorted(n["node_id"] for n in v["nodes"] if n["alive"])
            return alive == list(NODES) and len(_schedulers(v)) == 1 and pollers(v) == ["n1"]

        view = await wait_cluster(tmp_path / "n1", "three nodes, n1 polling, another scheduling", settled)
        sched = _schedulers(view)[0]
        assert sched != "n1"
        yield sched


async def test_a_scheduled_answer_made_on_a_node_that_does_not_poll_reaches_the_chat_once(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    fake, uid = fake_telegram, fake_telegram.user["id"]
    async with _n1_polls(tmp_path, fake, fake_openai, pg_url) as sched:
        await call(tmp_path / sched, "cron.add", {"name": "relayed", "schedule": "in 1s", "prompt": "Tick",
                                                  "deliver": f"telegram:{uid}"})

        async def sent_and_marked() -> bool:
            return await _ledger(pg_url) == [("telegram", "sent")]

        await _eventually(sent_and_marked, "the scheduled answer to be sent and marked")
        runs = await _runs(pg_url)
        assert [(r[1], r[2]) for r in runs] == [("ok", f"hermes-gateway/{sched}")]  # run where no poller is
        said = answers(fake, uid)
        assert said == ["⏰ relayed\n\necho: Tick"]  # once, as it would have been sent
        assert await _path(pg_url) == RELAYED
        assert not said[0].startswith(RECOVERED)


async def test_a_turn_run_by_a_lane_owner_that_does_not_poll_is_answered_once_through_the_poller(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    fake, uid = fake_telegram, fake_telegram.user["id"]
    key = f"agent:main:telegram:dm:{uid}"
    msg = InboundMessage("telegram", str(uid), ChatType.DM, str(uid), "handed over", message_id="4242",
                         dedupe_id=f"{uid}:4242")
    async with _n1_polls(tmp_path, fake, fake_openai, pg_url):
        # What a failover leaves: the chat's lane is n2's (it served the chat) and a message the
        # poller handed to it waits in its inbox. n2 adopts it at its next heartbeat (or at the
        # NOTIFY) and runs the turn; n2 cannot send on Telegram.
        def left_for_n2(conn: PgConnection) -> None:
            lease = pc.acquire(conn, "lane", key, "n2", ttl=3.0)
            assert lease is not None and lease.node_id == "n2"
            pc.put_inbox(conn, key, to_payload(msg), from_node="n1", owner_node="n2")

        async with PgStore(pg_url, min_size=1, max_size=1) as store:
            await store.write(left_for_n2)

            async def answered_and_marked() -> bool:
                return await _ledger(pg_url) == [("telegram", "sent")]

            await _eventually(answered_and_marked, "the turn's answer to be sent and marked")
            done = await store.read(lambda c: c.execute("SELECT done_by FROM cluster_inbox").fetchall())
        assert [r[0] for r in done] == ["n2"]  # the turn ran on n2
        assert [(role, content) for _, role, content in await stored(pg_url)] == [
            ("user", "handed over"), ("assistant", "echo: handed over")]
        assert answers(fake, uid) == ["echo: handed over"]  # once, unprefixed
        assert await _path(pg_url) == RELAYED  # sent by n1 (Telegram's HTTP API would let n2 send it too)


