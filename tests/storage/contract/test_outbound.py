"""``outbound``: the delivery ledger on both backends; and on PostgreSQL, several nodes claiming
what a crash cut off at once, each row claimed by exactly one of them."""

from __future__ import annotations

import asyncio
import threading
from functools import partial
from types import ModuleType
from typing import Any

import pytest

import storage.postgres as _PG
from storage import LedgerFile, PendingReply
from storage.postgres import PgStore
from storage.postgres import outbound as pg_outbound

from ._routing_rows import T0, server_outside_the_loop, sql
from .conftest import Db

_server_first = pytest.fixture(autouse=True)(server_outside_the_loop)

PDF = LedgerFile("a" * 64, "report.pdf", "application/pdf", "document", 1234)
PNG = LedgerFile("b" * 64, "chart.png", "image/png", "photo", 99)


def _record(m: ModuleType, conn: Any, text: str, now: float, *, key: str = "k", platform: str = "telegram",
            files: tuple[LedgerFile, ...] = ()) -> int:
    result: int = m.outbound.record(conn, session_key=key, session_id="s1", platform=platform, chat_id="c1",
                                    thread_id=None, reply_to="r1", text=text, now=now, files=files)
    return result


def _claim(m: ModuleType, conn: Any, platform: str, *, cutoff: float = 0.0,
           since: float | None = None) -> list[PendingReply]:
    """What the gateway's recovery writes in one transaction (gateway.routing.delivery)."""
    m.outbound.expire_pending(conn, platform, created_before=cutoff)
    rows: list[PendingReply] = m.outbound.pending(conn, platform, created_before=since)
    m.outbound.mark_recovering(conn, [r.id for r in rows])
    return rows


async def _statuses(db: Db) -> list[tuple[Any, ...]]:
    rows = await db.read(lambda c: c.execute(
        "SELECT id, status, attempts, sent_at, error FROM gateway_outbound ORDER BY id").fetchall())
    return [tuple(r) for r in rows]


async def test_the_ledger_from_record_to_recovery(db: Db) -> None:
    outbound = db.m.outbound
    old = await db.write(lambda c: _record(db.m, c, "old", T0))
    new = await db.write(lambda c: _record(db.m, c, "new", T0 + 100))
    failed = await db.write(lambda c: _record(db.m, c, "failed", T0 + 100))
    elsewhere = await db.write(lambda c: _record(db.m, c, "slack's", T0 + 100, platform="slack"))
    assert len({old, new, failed, elsewhere}) == 4 and min(old, new, failed, elsewhere) > 0
    await db.write(partial(outbound.mark, ledger_id=failed, status="failed", error="boom", now=T0 + 101))
    assert await db.read(partial(outbound.last_failure, session_key="k")) == "boom"
    assert await db.read(partial(outbound.last_failure, session_key="elsewhere")) is None
    await db.write(partial(outbound.expire_pending, platform="telegram", created_before=T0 + 50))
    pending = await db.read(partial(outbound.pending, platform="telegram"))
    assert [(p.id, p.text, p.reply_to, p.created_at, p.interrupted, p.files, p.files_sent) for p in pending] == [
        (new, "new", "r1", T0 + 100, False, (), None)]
    assert await db.read(partial(outbound.pending, platform="telegram", created_before=T0 + 100)) == []
    await db.write(partial(outbound.mark_recovering, ledger_ids=[new]))
    await db.write(partial(outbound.mark_recovering, ledger_ids=[]))  # nothing to claim is no error
    assert await db.read(partial(outbound.pending, platform="telegram")) == []
    await db.write(partial(outbound.mark, ledger_id=new, status="recovered", error=None, now=T0 + 200))
    assert await _statuses(db) == [(old, "expired", 0, None, None), (new, "recovered", 1, T0 + 200, None),
                                   (failed, "failed", 1, None, "boom"), (elsewhere, "pending", 0, None, None)]


async def test_every_attempt_counts_and_only_a_sent_reply_has_a_sent_time(db: Db) -> None:
    outbound = db.m.outbound
    rid = await db.write(lambda c: _record(db.m, c, "hello", T0))
    await db.write(partial(outbound.mark, ledger_id=rid, status="failed", error=None, now=T0 + 1))
    assert await db.read(partial(outbound.last_failure, session_key="k")) is None  # failed without an error
    await db.write(partial(outbound.mark, ledger_id=rid, status="sent", error=None, now=T0 + 2))
    await db.write(partial(outbound.mark, ledger_id=rid, status="failed", error="edit refused", now=T0 + 3))
    assert await _statuses(db) == [(rid, "failed", 3, T0 + 2, "edit refused")]
    later = await db.write(lambda c: _record(db.m, c, "again", T0 + 4))
    await db.write(partial(outbound.mark, ledger_id=later, status="failed", error="newest", now=T0 + 5))
    assert await db.read(partial(outbound.last_failure, session_key="k")) == "newest"


async def test_a_stream_is_a_row_before_its_answer_is_stored(db: Db) -> None:
    outbound = db.m.outbound

    def open_stream(conn: Any) -> int:
        result: int = outbound.open_stream(conn, session_key="k", session_id=None, platform="discord",
                                           chat_id="c9", thread_id="t1", reply_to="m0", message_ids=[], now=T0)
        return result

    sid = await db.write(open_stream)
    assert await db.write(partial(outbound.set_message_ids, ledger_id=sid, message_ids=["m1", "m2"]))
    assert not await db.write(partial(outbound.set_message_ids, ledger_id=sid + 1000, message_ids=["x"]))
    # cut off here: a crash leaves a streaming row, shown to recovery as interrupted
    [cut] = await db.read(partial(outbound.pending, platform="discord"))
    assert cut == PendingReply(sid, "discord", "c9", "t1", "m0", "", T0, message_ids=("m1", "m2"), interrupted=True)
    assert await db.write(partial(outbound.settle_stream, ledger_id=sid, text="the answer", session_id="s7",
                                  files=(PDF,)))
    assert not await db.write(partial(outbound.settle_stream, ledger_id=sid, text="again", session_id=None))
    [settled] = await db.read(partial(outbound.pending, platform="discord"))
    assert settled == PendingReply(sid, "discord", "c9", "t1", "m0", "the answer", T0, message_ids=("m1", "m2"),
                                   interrupted=False, files=(PDF,))
    session = await db.read(lambda c: sql(db, c, "SELECT session_id FROM gateway_outbound WHERE id = %s",
                                          (sid,)).fetchone())
    assert session[0] == "s7"
    assert await db.write(partial(outbound.set_message_ids, ledger_id=sid, message_ids=["m1", "m2", "m3"]))
    await db.write(partial(outbound.mark, ledger_id=sid, status="sent", error=None, now=T0 + 1))
    assert not await db.write(partial(outbound.set_message_ids, ledger_id=sid, message_ids=["late"]))


async def test_expiry_covers_cut_off_streams_and_only_the_platform_given(db: Db) -> None:
    outbound = db.m.outbound
    stream = await db.write(lambda c: outbound.open_stream(c, session_key=None, session_id=None, platform="slack",
                                                           chat_id="C1", thread_id=None, reply_to=None,
                                                           message_ids=["1.2"], now=T0))
    reply = await db.write(lambda c: _record(db.m, c, "whole", T0, platform="slack"))
    other = await db.write(lambda c: _record(db.m, c, "telegram's", T0))
    await db.write(partial(outbound.expire_pending, platform="slack", created_before=T0 + 1))
    assert [(r[0], r[1]) for r in await _statuses(db)] == [(stream, "expired"), (reply, "expired"),
                                                          (other, "pending")]


async def test_a_replys_files_and_how_many_went_out(db: Db) -> None:
    outbound = db.m.outbound
    rid = await db.write(lambda c: _record(db.m, c, "with files", T0, files=(PDF,)))
    await db.write(partial(outbound.set_files, ledger_id=rid, files=(PDF, PNG)))
    await db.write(partial(outbound.set_files_sent, ledger_id=rid, count=0))  # its text is out
    [row] = await db.read(partial(outbound.pending, platform="telegram"))
    assert (row.files, row.files_sent) == ((PDF, PNG), 0)
    await db.write(partial(outbound.set_files_sent, ledger_id=rid, count=2))
    await db.write(partial(outbound.set_files_sent, ledger_id=rid, count=1))  # never goes back
    [row] = await db.read(partial(outbound.pending, platform="telegram"))
    assert row.files_sent == 2
    assert await db.read(partial(outbound.files_referenced, sha256s=[PDF.sha256, "c" * 64], since=T0)) == {PDF.sha256}
    assert await db.read(partial(outbound.files_referenced, sha256s=[PDF.sha256], since=T0 + 1)) == set()
    await db.write(partial(outbound.set_files, ledger_id=rid, files=()))
    assert await db.read(partial(outbound.files_referenced, sha256s=[PDF.sha256], since=T0)) == set()


async def test_a_damaged_row_reads_as_no_files_and_no_messages(db: Db) -> None:
    rid = await db.write(lambda c: _record(db.m, c, "x", T0))
    await db.write(lambda c: sql(db, c, "UPDATE gateway_outbound SET files = %s, message_ids = %s WHERE id = %s",
                                 ('[{"sha256": 1}]', "{not json", rid)))
    [row] = await db.read(partial(db.m.outbound.pending, platform="telegram"))
    assert (row.files, row.message_ids) == ((), ())
    assert await db.read(partial(db.m.outbound.files_referenced, sha256s=["a"], since=0.0)) == set()


async def test_a_claim_takes_what_was_left_before_the_start_once(db: Db) -> None:
    before = [await db.write(partial(_record, db.m, text=f"cut off {n}", now=T0 + n)) for n in range(3)]
    await db.write(lambda c: _record(db.m, c, "written after the start", T0 + 10))
    claimed = await db.write(lambda c: _claim(db.m, c, "telegram", cutoff=T0 + 1, since=T0 + 5))
    assert [r.id for r in claimed] == before[1:]  # the oldest expired, the newest is not the crash's
    assert await db.write(lambda c: _claim(db.m, c, "telegram", cutoff=T0 + 1, since=T0 + 5)) == []


# ------------------------------------------------------------------ several nodes (PostgreSQL)


async def test_a_node_claiming_skips_the_rows_another_node_is_claiming(pg_url: str) -> None:
    """Node A has read the pending rows in its claim and not yet marked them; node B's whole
    claim runs meanwhile. B must take none of them, and must not wait for A to do so."""
    a_read, b_done = threading.Event(), threading.Event()

    def claim_slowly(conn: Any) -> list[PendingReply]:
        pg_outbound.expire_pending(conn, "telegram", created_before=0.0)
        rows = pg_outbound.pending(conn, "telegram")
        a_read.set()
        if not b_done.wait(120):
            raise AssertionError("node B's claim waited for node A's")
        pg_outbound.mark_recovering(conn, [r.id for r in rows])
        return rows

    async with PgStore(pg_url) as node_a, PgStore(pg_url) as node_b:
        ids = [await node_a.write(partial(_record, _PG, text=f"r{n}", now=T0 + n)) for n in range(5)]
        task_a = asyncio.create_task(node_a.write(claim_slowly))
        assert await asyncio.to_thread(a_read.wait, 120)
        claimed_b = await node_b.write(lambda c: _claim(_PG, c, "telegram"))
        b_done.set()
        claimed_a = await task_a
        assert [r.id for r in claimed_a] == ids
        assert claimed_b == []
        assert await node_b.write(lambda c: _claim(_PG, c, "telegram")) == []  # after A's commit: recovering


async def test_three_nodes_claiming_while_replies_are_written_claim_each_row_once(pg_url: str) -> None:
    total = 120
    written: list[int] = []
    done = asyncio.Event()

    async def writer(store: PgStore) -> None:
        for n in range(total):
            written.append(await store.write(partial(_record, _PG, text=f"r{n}", now=T0 + n)))
        done.set()

    async def claimer(store: PgStore) -> list[int]:
        got: list[int] = []
        while True:
            finished = done.is_set()  # read before the claim: a claim after the last write follows
            got.extend(r.id for r in await store.write(lambda c: _claim(_PG, c, "telegram")))
            if finished:
                return got
            await asyncio.sleep(0)

    async with PgStore(pg_url) as a, PgStore(pg_url) as b, PgStore(pg_url) as c:
        results = await asyncio.gather(claimer(a), claimer(b), claimer(c), writer(a))
        claims = [ids for ids in results if ids is not None]
        every = sorted(i for ids in claims for i in ids)
        assert every == sorted(written)  # each row claimed, and by one node only
        assert len(written) == total
        left = await a.read(lambda conn: conn.execute(
            "SELECT count(*) FROM gateway_outbound WHERE status <> 'recovering'").fetchone())
        assert left is not None and left[0] == 0

