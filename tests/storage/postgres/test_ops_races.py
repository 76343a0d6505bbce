"""Two nodes writing one session at once, made to happen in a set order: another node's transaction
(a plain connection) holds a lock, our write waits on it (seen in pg_stat_activity, not guessed
with a sleep), then the other commits. Each test shows the case the PostgreSQL ops guard against
that SQLite's single writer never meets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import psycopg
import pytest

from storage import PruneSkip, SessionNotFoundError, TitleConflictError
from storage.postgres import PgStore, ops

T = TypeVar("T")
DAY = 86400.0


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PgStore]:
    async with PgStore(pg_url) as s:
        yield s


async def _while_other_holds(pg_url: str, store: PgStore, other: Callable[[psycopg.Connection[Any]], object],
                             ours: Callable[[Any], T]) -> T:
    """``other`` runs in an open transaction of another connection; ``ours`` is written while it is
    open, and it commits once ``ours`` waits for one of its locks."""
    with psycopg.connect(pg_url, autocommit=True) as node, psycopg.connect(pg_url, autocommit=True) as watcher:
        node.execute("BEGIN")
        other(node)
        task = asyncio.ensure_future(store.write(ours))
        while not task.done():
            row = watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                  "AND wait_event_type = 'Lock'").fetchone()
            if row is not None and row[0] > 0:
                break
            await asyncio.sleep(0.01)
        node.execute("COMMIT")
        return await task


def _one(conn: Any, sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


async def test_a_title_taken_by_another_node_meanwhile_is_a_conflict_the_caller_can_catch(
        pg_url: str, store: PgStore) -> None:
    await store.write(lambda c: (ops.create_session(c, "s1", "cli"), ops.create_session(c, "s2", "cli")))

    def ours(conn: Any) -> tuple[str, str | None]:
        try:
            ops.set_session_title(conn, "s2", "Plan")
        except TitleConflictError as exc:  # its check saw no "Plan"; the unique index did
            return exc.other_session_id, ops.set_session_title(conn, "s2", exc.suggestion)
        raise AssertionError("no conflict")

    got = await _while_other_holds(pg_url, store, lambda node: ops.set_session_title(node, "s1", "Plan"), ours)
    assert got == ("s1", "Plan #2")


async def test_a_delete_waits_for_a_message_another_node_is_appending_and_takes_it(
        pg_url: str, store: PgStore) -> None:
    await store.write(lambda c: ops.create_session(c, "s1", "cli"))
    deleted = await _while_other_holds(pg_url, store, lambda node: ops.append_message(node, "s1", "user", "late"),
                                       lambda c: ops.delete_session(c, "s1"))
    assert deleted
    assert await store.read(lambda c: _one(c, "SELECT count(*) FROM messages")) == 0
    with pytest.raises(SessionNotFoundError):  # and a later append finds the session gone
        await store.write(lambda c: ops.append_message(c, "s1", "user", "later"))


async def test_an_undo_counts_what_another_node_appended_before_it(pg_url: str, store: PgStore) -> None:
    await store.write(lambda c: ops.create_session(c, "s1", "cli"))
    first = await store.write(lambda c: ops.append_message(c, "s1", "user", "q"))
    calls = [{"id": "c", "type": "function", "function": {"name": "x", "arguments": "{}"}}]
    went = await _while_other_holds(
        pg_url, store, lambda node: ops.append_message(node, "s1", "assistant", None, tool_calls=calls),
        lambda c: ops.delete_messages_from(c, "s1", first))
    assert went == 2
    assert await store.read(lambda c: _one(c, "SELECT message_count + tool_call_count FROM sessions")) == 0


async def test_a_prune_keeps_a_parent_another_node_just_continued(pg_url: str, store: PgStore) -> None:
    now = time.time()
    await store.write(lambda c: ops.create_session(c, "old", "cli", started_at=now - 200 * DAY))
    await store.write(lambda c: ops.end_session(c, "old", "compression", at=now - 199 * DAY))
    # the other node's compression continues "old" in "new" while our prune plans
    result = await _while_other_holds(
        pg_url, store, lambda node: ops.create_session(node, "new", "cli", parent_session_id="old", started_at=now),
        lambda c: ops.prune(c, 100, now=now))
    assert (result.deleted, result.skipped) == (0, (PruneSkip("old", None, "new"),))
    assert await store.read(lambda c: _one(c, "SELECT parent_session_id FROM sessions WHERE id = 'new'")) == "old"
