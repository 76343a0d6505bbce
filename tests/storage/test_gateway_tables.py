"""The gateway's tables through storage's public functions, on a real state.db.

The gateway's own tests drive these through the router and the commands; here
each function is held to what its name promises, so a second backend has the
same contract to meet.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from storage import (
    ChatOwner,
    HandoffRow,
    HomeChannelRow,
    StateStore,
    StorageError,
    bindings,
    handoffs,
    home_channels,
    inbound,
    ops,
    outbound,
    ownership,
    queries,
    quick_check,
)

T0 = 1_700_000_000.0


async def _session(store: StateStore, session_id: str, source: str = "telegram", *, user_id: str | None = None,
                   started_at: float = T0, title: str | None = None) -> None:
    def op(conn: sqlite3.Connection) -> None:
        ops.create_session(conn, session_id, source, user_id=user_id, started_at=started_at)
        if title is not None:
            ops.set_session_title(conn, session_id, title)

    await store.write(op)


def _bind(conn: sqlite3.Connection, key: str, session_id: str, now: float, platform: str = "telegram",
          user_id: str | None = "u1") -> None:
    bindings.bind(conn, key, session_id, platform=platform, chat_id="c1", chat_type="dm", thread_id=None,
                  user_id=user_id, now=now)


async def test_bindings_point_a_key_at_a_session_and_remember_every_binding(store: StateStore) -> None:
    await _session(store, "s1")
    await store.write(lambda c: ops.append_message(c, "s1", "user", "hi", timestamp=T0 + 50))
    assert await store.read(lambda c: bindings.lookup(c, "k")) is None
    await store.write(lambda c: _bind(c, "k", "s1", T0 + 10))
    entry = await store.read(lambda c: bindings.lookup(c, "k"))
    assert entry is not None
    assert (entry.session_id, entry.updated_at, entry.session_exists, entry.ended_at, entry.last_message_at) == (
        "s1", T0 + 10, True, None, T0 + 50)
    await store.write(lambda c: _bind(c, "k", "gone", T0 + 20))  # a session that does not exist
    entry = await store.read(lambda c: bindings.lookup(c, "k"))
    assert entry is not None and entry.session_id == "gone" and not entry.session_exists
    assert await store.read(lambda c: bindings.bound_session(c, "k")) == ("gone", T0 + 20)
    assert await store.read(lambda c: bindings.was_bound(c, "k", "s1"))
    # Compare-and-set: only while the key still points where the caller thinks.
    assert not await store.write(lambda c: bindings.repoint(c, "k", "s1", "s1", T0 + 10))
    assert await store.write(lambda c: bindings.repoint(c, "k", "gone", "s1", T0 + 10))
    assert await store.read(lambda c: bindings.bound_session(c, "k")) == ("s1", T0 + 10)
    assert not await store.write(lambda c: bindings.unbind(c, "k", "gone"))
    assert await store.write(lambda c: bindings.unbind(c, "k", "s1"))
    assert await store.read(lambda c: bindings.lookup(c, "k")) is None
    assert await store.read(lambda c: bindings.was_bound(c, "k", "s1"))  # unbinding keeps the history
    await store.write(lambda c: bindings.forget_binding(c, "k", "s1"))
    assert not await store.read(lambda c: bindings.was_bound(c, "k", "s1"))


async def test_queued_titles_expire_and_are_replaced(store: StateStore) -> None:
    await store.write(lambda c: bindings.queue_title(c, "k", "first", now=T0))
    await store.write(lambda c: bindings.queue_title(c, "k", "second", now=T0 + 5))
    await store.write(lambda c: bindings.queue_title(c, "old", "stale", now=T0 - 100))
    assert await store.read(lambda c: bindings.pending_title(c, "k", queued_since=T0)) == "second"
    assert await store.read(lambda c: bindings.pending_title(c, "k", queued_since=T0 + 6)) is None
    await store.write(lambda c: bindings.sweep_pending_titles(c, queued_before=T0))
    assert await store.read(lambda c: bindings.pending_title(c, "old", queued_since=0.0)) is None
    await store.write(lambda c: bindings.forget_pending_title(c, "k"))
    assert await store.read(lambda c: bindings.pending_title(c, "k", queued_since=0.0)) is None


async def test_ownership_is_the_chat_a_session_lived_in_or_the_terminal_login(store: StateStore) -> None:
    await _session(store, "mine_1", started_at=T0, title="Plan")
    await _session(store, "mine_2", started_at=T0 + 1, title="Plan #2")
    await _session(store, "theirs", started_at=T0 + 2, title="Plan #3")
    await _session(store, "term_1", "cli", user_id="alice", started_at=T0 + 3)
    await store.write(lambda c: (_bind(c, "k", "mine_1", T0), _bind(c, "k", "mine_2", T0 + 1),
                                 _bind(c, "other", "theirs", T0 + 2)))
    chat = ChatOwner("k", "telegram", "u1")
    assert await store.read(lambda c: ownership.owned_ids(c, chat, limit=10)) == ["mine_2", "mine_1"]
    assert await store.read(lambda c: ownership.owned_ids(c, chat, limit=1)) == ["mine_2"]
    assert await store.read(lambda c: ownership.owns(c, chat, "mine_1"))
    assert not await store.read(lambda c: ownership.owns(c, chat, "theirs"))
    assert await store.read(lambda c: ownership.owned_ids_by_prefix(c, chat, "mine_")) == ["mine_2", "mine_1"]
    assert await store.read(lambda c: ownership.owned_ids_by_prefix(c, chat, "mine%")) == []  # LIKE is escaped
    titled = await store.read(lambda c: ownership.owned_titled(c, chat, "Plan", "Plan"))
    assert sorted((t.id, t.title) for t in titled) == [("mine_1", "Plan"), ("mine_2", "Plan #2")]
    terminal = ChatOwner("agent:main:cli:dm:xyz", "cli", "alice")
    assert await store.read(lambda c: ownership.owned_ids(c, terminal, limit=10)) == ["term_1"]
    stranger = ChatOwner("agent:main:cli:dm:xyz", "cli", "bob")
    assert await store.read(lambda c: ownership.owned_ids(c, stranger, limit=10)) == []


async def test_inbound_records_once_and_sweeps_by_age(store: StateStore) -> None:
    assert not await store.read(lambda c: inbound.seen(c, "telegram", "m1"))
    await store.write(lambda c: inbound.record(c, "telegram", "m1", now=T0))
    await store.write(lambda c: inbound.record(c, "telegram", "m1", now=T0 + 100))  # a copy: ignored
    await store.write(lambda c: inbound.record(c, "discord", "m1", now=T0 + 100))
    assert await store.read(lambda c: inbound.seen(c, "telegram", "m1"))
    assert await store.write(lambda c: inbound.sweep(c, seen_before=T0 + 50)) == 1
    assert not await store.read(lambda c: inbound.seen(c, "telegram", "m1"))
    assert await store.read(lambda c: inbound.seen(c, "discord", "m1"))


async def test_the_outbound_ledger_from_record_to_recovery(store: StateStore) -> None:
    def record(conn: sqlite3.Connection, text: str, now: float) -> int:
        return outbound.record(conn, session_key="k", session_id="s1", platform="telegram", chat_id="c1",
                               thread_id=None, reply_to="r1", text=text, now=now)

    old = await store.write(lambda c: record(c, "old", T0))
    new = await store.write(lambda c: record(c, "new", T0 + 100))
    failed = await store.write(lambda c: record(c, "failed", T0 + 100))
    await store.write(lambda c: outbound.mark(c, failed, "failed", "boom", now=T0 + 101))
    assert await store.read(lambda c: outbound.last_failure(c, "k")) == "boom"
    assert await store.read(lambda c: outbound.last_failure(c, "elsewhere")) is None
    await store.write(lambda c: outbound.expire_pending(c, "telegram", created_before=T0 + 50))
    pending = await store.read(lambda c: outbound.pending(c, "telegram"))
    assert [(p.id, p.text, p.reply_to, p.created_at) for p in pending] == [(new, "new", "r1", T0 + 100)]
    await store.write(lambda c: outbound.mark_recovering(c, [new]))
    assert await store.read(lambda c: outbound.pending(c, "telegram")) == []
    await store.write(lambda c: outbound.mark(c, new, "recovered", None, now=T0 + 200))
    rows = await store.read(lambda c: c.execute(
        "SELECT id, status, attempts, sent_at FROM gateway_outbound ORDER BY id").fetchall())
    assert [tuple(r) for r in rows] == [(old, "expired", 0, None), (new, "recovered", 1, T0 + 200),
                                        (failed, "failed", 1, None)]


async def test_handoff_rows_change_state_only_from_the_states_given(store: StateStore) -> None:
    def insert(conn: sqlite3.Connection, session_id: str) -> int | None:
        return handoffs.insert_pending(conn, session_id=session_id, source_key="src", source_platform="cli",
                                       source_chat_id="c", source_thread_id=None, target_platform="telegram",
                                       target_chat_id=None, now=T0)

    hid = await store.write(lambda c: insert(c, "s1"))
    assert hid is not None
    assert await store.write(lambda c: insert(c, "s1")) is None  # one live handoff per session
    assert await store.write(lambda c: handoffs.set_state(c, hid, to="claimed", only_from=("pending",), error=None,
                                                          now=T0 + 1, fields={"target_key": "t"}))
    assert not await store.write(lambda c: handoffs.set_state(c, hid, to="failed", only_from=("pending",),
                                                              error="late", now=T0 + 2))
    assert await store.read(lambda c: handoffs.get(c, hid)) == HandoffRow(
        hid, "s1", "src", "cli", "telegram", "claimed", None, None, None, "t")
    other = await store.write(lambda c: insert(c, "s2"))
    assert await store.write(lambda c: handoffs.set_state_of_all(
        c, to="failed", only_from=("pending", "claimed"), error="restarted", now=T0 + 3)) == 2
    row = await store.read(lambda c: handoffs.get(c, other or 0))
    assert row is not None and (row.state, row.error) == ("failed", "restarted")
    assert await store.read(lambda c: handoffs.get(c, 999)) is None


async def test_home_channels_are_one_per_platform(store: StateStore) -> None:
    assert await store.read(lambda c: home_channels.get(c, "telegram")) is None
    await store.write(lambda c: home_channels.put(c, "telegram", chat_id="1", thread_id=None, chat_type="dm",
                                                  set_by="u1", now=T0))
    await store.write(lambda c: home_channels.put(c, "telegram", chat_id="2", thread_id="t", chat_type="group",
                                                  set_by="u2", now=T0 + 1))
    assert await store.read(lambda c: home_channels.get(c, "telegram")) == HomeChannelRow(
        "telegram", "2", "t", "group", "u2", T0 + 1)


async def test_session_reads_the_gateway_uses(store: StateStore, db_path: Path) -> None:
    await _session(store, "a", "cli", started_at=T0, title="Named")
    await _session(store, "b", "cli", started_at=T0 + 1)
    await _session(store, "c", "telegram", started_at=T0 + 2)
    await store.write(lambda c: ops.end_session(c, "a", "done", at=T0 + 5))
    for i, role in enumerate(("user", "tool", "assistant", "user")):
        await store.write(lambda c, i=i, role=role: ops.append_message(c, "b", role, f"m{i}", timestamp=T0 + i))
    assert await store.read(lambda c: queries.title_in_use(c, "Named"))
    assert not await store.read(lambda c: queries.title_in_use(c, "Other"))
    assert await store.read(lambda c: queries.latest_session_id(c, "cli")) == "b"
    assert await store.read(lambda c: queries.latest_session_id(c, "slack")) is None
    assert await store.read(lambda c: (queries.count_sessions(c), queries.count_sessions(c, "cli"))) == (3, 2)
    dialogue = await store.read(lambda c: queries.recent_dialogue(c, "b", 2))
    assert [(m["role"], m["content"]) for m in dialogue] == [("assistant", "m2"), ("user", "m3")]
    ids = await store.read(lambda c: queries.prunable_session_ids(c, 1, now=T0 + 2 * 86400))
    assert ids == ["a"]  # ended and old enough; the others are still active
    assert await store.read(lambda c: queries.prunable_session_ids(c, 1, "telegram", now=T0 + 2 * 86400)) == []
    assert quick_check(db_path) == ["ok"]


def test_quick_check_of_a_file_that_is_no_database(tmp_path: Path) -> None:
    junk = tmp_path / "state.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StorageError, match="not a database"):
        quick_check(junk)


def test_session_settings_are_set_replaced_removed_and_go_with_their_session(tmp_path: Path) -> None:
    import asyncio
    from functools import partial

    from storage import StateStore, ops, settings

    async def main() -> None:
        async with StateStore(tmp_path / "state.db") as store:
            await store.create_session("s1", "telegram")
            await store.write(partial(settings.set_session, session_id="s1", name="model", value="a", now=1.0))
            await store.write(partial(settings.set_session, session_id="s1", name="model", value="b", now=2.0))
            await store.write(partial(settings.set_session, session_id="s1", name="reasoning", value="on", now=2.0))
            assert await store.read(partial(settings.session_settings, session_id="s1")) == {
                "model": "b", "reasoning": "on"}
            await store.write(partial(settings.set_session, session_id="s1", name="reasoning", value=None, now=3.0))
            assert await store.read(partial(settings.get_session, session_id="s1", name="reasoning")) is None
            await store.write(partial(settings.set_global, name="model", value="m", updated_by="telegram:1", now=1.0))
            assert await store.read(partial(settings.get_global, name="model")) == "m"
            await store.write(partial(ops.delete_session, session_id="s1"))
            assert await store.read(partial(settings.session_settings, session_id="s1")) == {}

    asyncio.run(main())
