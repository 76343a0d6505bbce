"""A node that loses a chat's lane mid-turn (its lease ran out: the database away, a stall) and
takes the lane again under a new token leaves the cut-off message's row to that new take of the
lane, even though the new owner is itself: the message is answered once, after all.

One real daemon process on a real PostgreSQL server, FakeTelegram polling. Two orders of events:

- the new take claims the row while the first turn still runs: the lane running dry when that
  turn ends must not settle the row (``finish_claimed``) before the row's message is in the lane;
- the test holds the row locked (as a slow transaction would), so the new take cannot claim it
  before the first turn ends: that turn's end must not settle a row it no longer holds under its
  own token."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._telegram_process import telegram_daemon, until
from ._cluster import delivered, pollers, stored, wait_cluster


@pytest.mark.parametrize("row_locked", [False, True], ids=["claimed-while-it-runs", "claimed-after-it-ended"])
async def test_a_lane_lost_and_taken_again_by_the_same_node_leaves_the_message_to_that_new_take(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str, row_locked: bool
) -> None:
    fake, uid = fake_telegram, fake_telegram.user["id"]
    held: list[bool] = []

    def first_call(body: dict[str, Any]) -> bool:  # the turn that loses its lane; not its retake
        if "first" in str(body["messages"][-1]) and not held:
            held.append(True)
            return True
        return False

    hold = fake_openai.hold_when(first_call)
    home = tmp_path / "n1"
    log = home / "daemon.log"
    async with telegram_daemon(home, fake, fake_openai, logging={"level": "info"}, storage={"url": pg_url},
                               cluster={"node_id": "n1", "failover_s": 3}) as proc:
        await wait_cluster(home, "the node polling", lambda v: len(pollers(v)) == 1)
        await until(fake.connected, "the node to poll", proc)
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin, \
                await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as locker:

            async def one(sql: str) -> Any:
                row = await (await admin.execute(sql)).fetchone()
                return None if row is None else row[0]

            await fake.user_says("first")
            await until(hold.arrived.is_set, "the first turn at the model", proc)
            lane = "SELECT token FROM cluster_leases WHERE kind = 'lane' AND expires_at > extract(epoch from now())"
            token = await one(lane)
            assert token is not None
            if row_locked:
                await locker.execute("BEGIN")
                rows = await (await locker.execute(
                    "SELECT id FROM cluster_inbox WHERE done_at IS NULL FOR UPDATE")).fetchall()
                assert len(rows) == 1, rows  # the message's parked row
            # the lease runs out under the turn; the node's next heartbeat takes the lane again
            # (a new token), and claims the row (unless it is locked)
            await admin.execute("UPDATE cluster_leases SET expires_at = extract(epoch from now()) - 1"
                                " WHERE kind = 'lane'")

            async def retaken() -> None:
                while (now := await one(lane)) is None or now == token:
                    await asyncio.sleep(0.1)

            await asyncio.wait_for(retaken(), 30)
            hold.release.set()
            await until(lambda: "router.lane_lost" in log.read_text(), "the first turn's answer refused", proc)
            # its end leaves the row (a settle fenced with the new token would wait on the lock,
            # then mark the unanswered message done)
            await until(lambda: "router.parked_left_to_new_owner" in log.read_text(), "the row left", proc)
            if row_locked:
                await locker.execute("ROLLBACK")
        await until(lambda: "first" in [t for _, t in delivered(fake)], "the first message answered", proc)
        await fake.user_says("second")
        await until(lambda: "second" in [t for _, t in delivered(fake)], "the second message answered", proc)
    assert [t for c, t in delivered(fake) if c == uid] == ["first", "second"]
    stored_ = [(role, content) for _, role, content in await stored(pg_url)]
    assert stored_ == [("user", "first"), ("assistant", "echo: first"), ("user", "second"),
                       ("assistant", "echo: second")], stored_


async def test_a_lane_held_for_nothing_is_let_go(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    """A lease on a chat's lane that the node holds with nothing of the chat running there (its
    release was missed: the lane lapsed on the node a moment while a late heartbeat renewed its
    lease, or the release met the database away) is let go, instead of being renewed by every
    heartbeat for as long as the node lives while other nodes wait for the chat."""
    home = tmp_path / "n1"
    key = "agent:main:telegram:dm:5000000999"
    async with telegram_daemon(home, fake_telegram, fake_openai, logging={"level": "info"}, storage={"url": pg_url},
                               cluster={"node_id": "n1", "failover_s": 3}) as proc:
        await wait_cluster(home, "the node polling", lambda v: len(pollers(v)) == 1)
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
            now = "extract(epoch from now())"
            await admin.execute(
                "INSERT INTO cluster_leases (kind, name, node_id, token, acquired_at, expires_at)"
                f" VALUES ('lane', %s, 'n1', nextval('cluster_fence'), {now}, {now} + 3)", (key,))

            async def live() -> bool:
                row = await (await admin.execute(
                    f"SELECT 1 FROM cluster_leases WHERE kind = 'lane' AND name = %s AND expires_at > {now}",
                    (key,))).fetchone()
                return row is not None

            for _ in range(300):  # each heartbeat of the node renews it, until the node lets it go
                if not await live():
                    break
                await asyncio.sleep(0.1)
            assert not await live()
        await until(lambda: "cluster.quiet_lane_let_go" in (home / "daemon.log").read_text(), "the log", proc)
