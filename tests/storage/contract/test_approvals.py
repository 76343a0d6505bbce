"""``approvals`` on both backends: the patterns a session approved "always"."""

from __future__ import annotations

import asyncio
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


async def _rows(db: Db) -> list[tuple[Any, ...]]:
    sql = "SELECT session_id, pattern, tool, approved_by, created_at FROM gateway_approvals_always"
    rows = await db.read(lambda conn: conn.execute(sql).fetchall())
    return sorted(tuple(r) for r in rows)


async def test_a_remembered_pattern_is_the_sessions_and_the_first_always_stands(db: Db) -> None:
    a = db.m.approvals
    assert await db.read(partial(a.patterns, session_id="s1")) == set()
    await db.write(partial(a.remember, session_id="s1", pattern="rm -rf build", tool="terminal",
                           approved_by="telegram:1", now=1.0))
    await db.write(partial(a.remember, session_id="s1", pattern="rm -rf build", tool="terminal",
                           approved_by="telegram:2", now=2.0))  # once is enough
    await db.write(partial(a.remember, session_id="s1", pattern="git push", tool="terminal",
                           approved_by=None, now=3.0))
    await db.write(partial(a.remember, session_id="s2", pattern="write_file:/tmp/x", tool="write_file",
                           approved_by="slack:U1", now=4.0))
    assert await db.read(partial(a.patterns, session_id="s1")) == {"rm -rf build", "git push"}
    assert await db.read(partial(a.patterns, session_id="s2")) == {"write_file:/tmp/x"}
    assert await db.read(partial(a.patterns, session_id="s3")) == set()
    assert await _rows(db) == [
        ("s1", "git push", "terminal", None, 3.0),
        ("s1", "rm -rf build", "terminal", "telegram:1", 1.0),
        ("s2", "write_file:/tmp/x", "write_file", "slack:U1", 4.0),
    ]


async def test_patterns_are_exact_text(db: Db) -> None:
    a = db.m.approvals
    for pattern in ("rm -rf %", "RM -RF build", "rm -rf build "):
        await db.write(partial(a.remember, session_id="s1", pattern=pattern, tool="terminal", approved_by=None,
                               now=1.0))
    assert await db.read(partial(a.patterns, session_id="s1")) == {"rm -rf %", "RM -RF build", "rm -rf build "}


async def test_many_nodes_remembering_one_pattern_at_once_keep_one_row(db: Db) -> None:
    a = db.m.approvals
    await asyncio.gather(*(db.write(partial(a.remember, session_id="s1", pattern="make deploy", tool="terminal",
                                            approved_by=f"u{i}", now=float(i))) for i in range(12)))
    rows = await _rows(db)
    assert len(rows) == 1 and rows[0][:3] == ("s1", "make deploy", "terminal")
    assert await db.read(partial(a.patterns, session_id="s1")) == {"make deploy"}
