"""``usage`` on both backends: token sums per local day, per session and per person.

Sessions are written with plain SQL (``_insert_session``): these tests are about the sums.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from .conftest import Db


@pytest.fixture(autouse=True)
def _pg_server_outside_the_loop(request: pytest.FixtureRequest) -> None:
    # tests/pg/plugin.py migrates its template with asyncio.run: started first from the async
    # ``db`` fixture, that would run inside the test's loop and fail; a sync fixture starts it
    if getattr(request.node, "callspec", None) and request.node.callspec.params.get("db") == "postgresql":
        request.getfixturevalue("pg_server")


@pytest.fixture
def local_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process in Kathmandu (UTC+05:45): a local day starts at 18:15 UTC."""
    monkeypatch.setenv("TZ", "Asia/Kathmandu")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _utc(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S")))


async def _insert_session(db: Db, session_id: str, source: str = "cli", *, started_at: float,
                          **columns: Any) -> None:
    cols = {"id": session_id, "source": source, "started_at": started_at, **columns}
    sql = f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    if db.name == "postgresql":
        sql = sql.replace("?", "%s")
    await db.write(lambda conn: conn.execute(sql, tuple(cols.values())))


async def _bind(db: Db, key: str, session_id: str, user_id: str | None, at: float) -> None:
    sql = ("INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, first_bound_at) "
           "VALUES (?, ?, 'telegram', ?, ?)")
    if db.name == "postgresql":
        sql = sql.replace("?", "%s")
    await db.write(lambda conn: conn.execute(sql, (key, session_id, user_id, at)))


def _tokens(i: int, o: int, *, calls: int = 1, cached: int = 0, cost: float | None = None) -> dict[str, Any]:
    return {"input_tokens": i, "output_tokens": o, "api_call_count": calls, "cache_read_tokens": cached,
            "cache_write_tokens": 2 * cached, "reasoning_tokens": 3 * cached, "estimated_cost_usd": cost}


async def test_usage_by_day_counts_a_session_on_the_local_day_it_started(db: Db, local_zone: None) -> None:
    await _insert_session(db, "late", "cli", model="m", started_at=_utc("2026-03-01 18:14:59"), **_tokens(10, 1))
    await _insert_session(db, "next", "cli", model="m", started_at=_utc("2026-03-01 18:15:00"), **_tokens(20, 2))
    await _insert_session(db, "next2", "cli", model="m", started_at=_utc("2026-03-02 18:14:00"),
                          **_tokens(30, 3, cached=5))
    await _insert_session(db, "nomodel", "cli", started_at=_utc("2026-03-02 10:00:00"), **_tokens(1, 1, calls=0))
    await _insert_session(db, "Zeta", "Telegram", model="m", started_at=_utc("2026-03-02 09:00:00"),
                          **_tokens(4, 4))
    await _insert_session(db, "tg", "telegram", model="B", started_at=_utc("2026-03-02 09:00:00"), **_tokens(5, 5))
    await _insert_session(db, "tg2", "telegram", model="a", started_at=_utc("2026-03-02 09:30:00"),
                          **_tokens(6, 6))
    await _insert_session(db, "before", "cli", model="m", started_at=_utc("2026-02-20 12:00:00"), **_tokens(9, 9))
    await _insert_session(db, "empty", "cli", model="m", started_at=_utc("2026-03-03 12:00:00"),
                          input_tokens=None, output_tokens=None, api_call_count=None)

    rows = await db.read(partial(db.m.usage.usage_by_day, since=_utc("2026-03-01 00:00:00")))
    got = [(r.day, r.source, r.model, r.sessions, r.api_calls, r.input_tokens, r.output_tokens) for r in rows]
    assert got == [
        ("2026-03-01", "cli", "m", 1, 1, 10, 1),
        # 18:15 UTC is midnight in Kathmandu: "next" and "next2" started on the same local day
        ("2026-03-02", "Telegram", "m", 1, 1, 4, 4),
        ("2026-03-02", "cli", None, 1, 0, 1, 1),
        ("2026-03-02", "cli", "m", 2, 2, 50, 5),
        ("2026-03-02", "telegram", "B", 1, 1, 5, 5),
        ("2026-03-02", "telegram", "a", 1, 1, 6, 6),
        ("2026-03-03", "cli", "m", 1, 0, 0, 0),
    ]
    cli_m = rows[3]
    assert (cli_m.cache_read_tokens, cli_m.cache_write_tokens, cli_m.reasoning_tokens) == (5, 10, 15)
    assert all(type(v) is int for r in rows for v in (r.sessions, r.api_calls, r.input_tokens, r.reasoning_tokens))

    only_tg = await db.read(partial(db.m.usage.usage_by_day, since=0.0, source="telegram"))
    assert [(r.day, r.model) for r in only_tg] == [("2026-03-02", "B"), ("2026-03-02", "a")]
    assert await db.read(partial(db.m.usage.usage_by_day, since=_utc("2027-01-01 00:00:00"))) == []


async def test_session_totals(db: Db) -> None:
    await _insert_session(db, "s1", started_at=1e9, **_tokens(100, 20, calls=3, cached=7, cost=0.25))
    await _insert_session(db, "free", started_at=1e9, **_tokens(1, 2))
    totals = await db.read(partial(db.m.usage.session_totals, session_id="s1"))
    assert totals == db.m.usage.UsageTotals(1, 3, 100, 20, 7, 0.25)
    assert (await db.read(partial(db.m.usage.session_totals, session_id="free"))).cost_usd is None
    missing = await db.read(partial(db.m.usage.session_totals, session_id="nope"))
    assert missing == db.m.usage.UsageTotals(0, 0, 0, 0, 0, None)
    assert all(type(v) is int for v in (missing.sessions, missing.api_calls, missing.input_tokens))


async def test_usage_by_user_counts_each_session_for_its_chats_user(db: Db) -> None:
    t0 = 1_700_000_000.0
    await _insert_session(db, "a1", "telegram", user_id="alice", started_at=t0, **_tokens(100, 10, cost=0.5))
    await _insert_session(db, "a2", "telegram", user_id="alice", started_at=t0 + 10, **_tokens(50, 5, cost=0.25))
    # a shared session no user started: it counts for the user its chat was first bound for
    await _insert_session(db, "shared", "telegram", started_at=t0 + 20, **_tokens(300, 30))
    await _bind(db, "k-late", "shared", "carol", t0 + 30)
    await _bind(db, "k-b", "shared", "bob", t0 + 25)
    await _bind(db, "k-a", "shared", "dave", t0 + 25)  # same instant as bob's: by key
    await _bind(db, "k-none", "shared", None, t0 + 1)
    await _insert_session(db, "orphan", "cron", started_at=t0 + 40, **_tokens(1, 1))
    await _insert_session(db, "orphan2", "Cron", started_at=t0 + 50, **_tokens(1, 1))
    await _insert_session(db, "old", "telegram", user_id="erin", started_at=t0 - 100, **_tokens(5000, 0))

    rows = await db.read(partial(db.m.usage.usage_by_user))
    assert [(r.platform, r.user_id) for r in rows] == [
        ("telegram", "erin"), ("telegram", "dave"), ("telegram", "alice"), ("Cron", None), ("cron", None)]
    alice = rows[2].totals
    assert alice == db.m.usage.UsageTotals(2, 2, 150, 15, 0, 0.75)
    assert rows[1].totals.cost_usd is None

    recent = await db.read(partial(db.m.usage.usage_by_user, since=t0))
    assert [r.user_id for r in recent] == ["dave", "alice", None, None]
