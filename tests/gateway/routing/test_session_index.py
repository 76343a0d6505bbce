"""gateway.routing.session_index: key -> live session, reset policies, healing, rebinding.

A real state.db (the ``store`` fixture); the past is made by writing old
timestamps through the writer, never by patching the clock.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from datetime import datetime, timedelta
from typing import Any

import pytest

from adapters.base import ChatType, InboundMessage
from gateway.config import SessionResetConfig
from gateway.routing.session_index import SessionIndex, reset_reason
from storage import SessionNotFoundError, StateStore

SESSION_ID = re.compile(r"^\d{8}_\d{6}_[0-9a-f]{8}$")
KEY = "agent:main:testchat:dm:u1"


def message(user: str = "u1", platform: str = "testchat", chat_type: ChatType = ChatType.DM) -> InboundMessage:
    return InboundMessage(platform=platform, chat_id=user, chat_type=chat_type, user_id=user, text="hi",
                          message_id="m1")


async def index_row(store: StateStore, key: str) -> dict[str, Any] | None:
    def q(c: sqlite3.Connection) -> dict[str, Any] | None:
        row = c.execute("SELECT * FROM gateway_session_index WHERE session_key = ?", (key,)).fetchone()
        return None if row is None else dict(zip(row.keys(), tuple(row), strict=True))

    return await store.read(q)


async def set_last_active(store: StateStore, key: str, when: float) -> None:
    await store.write(
        lambda c: c.execute("UPDATE gateway_session_index SET updated_at = ? WHERE session_key = ?", (when, key))
    )


async def session(store: StateStore, session_id: str) -> dict[str, Any]:
    row = await store.get_session(session_id)
    assert row is not None, f"session {session_id} does not exist"
    return row


# ------------------------------------------------------------ resolve basics


async def test_first_resolve_creates_and_binds_then_reuses(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig())
    assert await index.current(KEY) is None
    first = await index.resolve(KEY, message(), model="m-1")
    assert first.created is True and first.reset_reason is None and first.previous_session_id is None
    assert SESSION_ID.match(first.session_id), first.session_id
    row = await session(store, first.session_id)
    assert (row["source"], row["user_id"], row["model"], row["ended_at"]) == ("testchat", "u1", "m-1", None)
    bound = await index_row(store, KEY)
    assert bound is not None
    assert (bound["session_id"], bound["platform"], bound["chat_id"], bound["chat_type"], bound["user_id"]) == (
        first.session_id, "testchat", "u1", "dm", "u1"
    )
    assert await index.current(KEY) == first.session_id

    second = await index.resolve(KEY, message())
    assert second.session_id == first.session_id and second.created is False
    assert await store.read(lambda c: c.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]) == 1


async def test_last_activity_is_the_latest_message_or_bind(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig(mode="idle", idle_minutes=60))
    binding = await index.resolve(KEY, message())
    await set_last_active(store, KEY, 1000.0)  # bound long ago ...
    await store.append_message(binding.session_id, "user", "recent words")  # ... but spoken to just now
    again = await index.resolve(KEY, message())
    assert again.session_id == binding.session_id and again.created is False
    assert await index.due_reset(KEY) is None
    # An ordinary turn writes nothing to the index.
    row = await index_row(store, KEY)
    assert row is not None and row["updated_at"] == 1000.0


async def test_keys_are_independent(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig())
    a = await index.resolve(KEY, message("u1"))
    b = await index.resolve("agent:main:testchat:dm:u2", message("u2"))
    assert a.session_id != b.session_id
    assert (await session(store, b.session_id))["user_id"] == "u2"


async def test_concurrent_first_messages_share_one_session(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig())
    bindings = await asyncio.wait_for(asyncio.gather(*(index.resolve(KEY, message()) for _ in range(8))), 10)
    assert len({b.session_id for b in bindings}) == 1
    assert sum(b.created for b in bindings) == 1
    assert await store.read(lambda c: c.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]) == 1


# --------------------------------------------------------- reset_reason()


def _ts(*parts: int) -> float:
    return datetime(*parts).timestamp()  # local time, as the policy reads it


@pytest.mark.parametrize(
    ("mode", "idle_minutes", "at_hour", "last", "now", "expected"),
    [
        # none: never, however long the silence or whatever the hour
        ("none", 1, 4, _ts(2024, 6, 1, 10, 0), _ts(2024, 6, 20, 10, 0), None),
        # idle: strictly after idle_minutes of silence
        ("idle", 30, 4, _ts(2024, 6, 10, 10, 0), _ts(2024, 6, 10, 10, 29), None),
        ("idle", 30, 4, _ts(2024, 6, 10, 10, 0), _ts(2024, 6, 10, 10, 31), "idle"),
        ("idle", 1440, 4, _ts(2024, 6, 10, 3, 59), _ts(2024, 6, 10, 4, 1), None),  # boundary means nothing
        ("idle", 1440, 4, _ts(2024, 6, 10, 10, 0), _ts(2024, 6, 11, 10, 1), "idle"),
        # daily: when the last activity is before the latest at_hour boundary
        ("daily", 1, 4, _ts(2024, 6, 10, 3, 59), _ts(2024, 6, 10, 4, 1), "daily"),
        ("daily", 1, 4, _ts(2024, 6, 10, 4, 0, 1), _ts(2024, 6, 10, 23, 0), None),
        ("daily", 1, 4, _ts(2024, 6, 10, 5, 0), _ts(2024, 6, 11, 3, 59), None),  # next boundary not reached
        ("daily", 1, 4, _ts(2024, 6, 10, 5, 0), _ts(2024, 6, 11, 4, 30), "daily"),
        ("daily", 1, 4, _ts(2024, 6, 9, 23, 0), _ts(2024, 6, 10, 2, 0), None),  # midnight is not the boundary
        ("daily", 1, 4, _ts(2024, 6, 1, 12, 0), _ts(2024, 6, 10, 12, 0), "daily"),
        ("daily", 1, 0, _ts(2024, 6, 10, 23, 59), _ts(2024, 6, 11, 0, 1), "daily"),
        ("daily", 1, 23, _ts(2024, 6, 10, 22, 0), _ts(2024, 6, 10, 22, 59), None),
        ("daily", 1, 23, _ts(2024, 6, 10, 22, 0), _ts(2024, 6, 10, 23, 1), "daily"),
        # both: idle is checked first, daily still applies on its own
        ("both", 60, 4, _ts(2024, 6, 10, 10, 0), _ts(2024, 6, 10, 11, 30), "idle"),
        ("both", 60, 4, _ts(2024, 6, 10, 3, 50), _ts(2024, 6, 10, 4, 10), "daily"),
        ("both", 60, 4, _ts(2024, 6, 10, 10, 0), _ts(2024, 6, 10, 10, 30), None),
        ("both", 60, 4, _ts(2024, 6, 10, 2, 0), _ts(2024, 6, 10, 5, 0), "idle"),
    ],
)
def test_reset_reason_table(
    mode: str, idle_minutes: int, at_hour: int, last: float, now: float, expected: str | None
) -> None:
    policy = SessionResetConfig(mode=mode, idle_minutes=idle_minutes, at_hour=at_hour)  # type: ignore[arg-type]
    assert reset_reason(policy, last, now) == expected


# ------------------------------------------------------------ policies live


async def test_idle_policy_rotates_after_idle_minutes(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig(mode="idle", idle_minutes=30))
    old = await index.resolve(KEY, message())

    await set_last_active(store, KEY, time.time() - 29 * 60)
    assert await index.due_reset(KEY) is None
    assert (await index.resolve(KEY, message())).session_id == old.session_id

    await set_last_active(store, KEY, time.time() - 31 * 60)
    assert await index.due_reset(KEY) == old.session_id  # reported before the rotation
    assert await index.current(KEY) == old.session_id  # current() does not rotate
    new = await index.resolve(KEY, message())
    assert new.created is True
    assert new.reset_reason == "idle"
    assert new.previous_session_id == old.session_id
    assert new.session_id != old.session_id and SESSION_ID.match(new.session_id)
    ended = await session(store, old.session_id)
    assert ended["ended_at"] is not None and "idle" in ended["end_reason"]
    assert (await session(store, new.session_id))["ended_at"] is None
    assert await index.current(KEY) == new.session_id
    assert await index.due_reset(KEY) is None


async def test_daily_policy_rotates_across_the_boundary(store: StateStore) -> None:
    now = datetime.now()
    at_hour = (now - timedelta(hours=1)).hour
    boundary = now.replace(hour=at_hour, minute=0, second=0, microsecond=0)
    if boundary > now:
        boundary -= timedelta(days=1)
    index = SessionIndex(store, SessionResetConfig(mode="daily", at_hour=at_hour))
    old = await index.resolve(KEY, message())

    await set_last_active(store, KEY, boundary.timestamp() + 1)  # after today's boundary: keep
    assert await index.due_reset(KEY) is None
    assert (await index.resolve(KEY, message())).session_id == old.session_id

    await set_last_active(store, KEY, boundary.timestamp() - 60)  # before it: rotate
    assert await index.due_reset(KEY) == old.session_id
    new = await index.resolve(KEY, message())
    assert (new.created, new.reset_reason, new.previous_session_id) == (True, "daily", old.session_id)
    ended = await session(store, old.session_id)
    assert ended["ended_at"] is not None and "daily" in ended["end_reason"]
    assert await index.due_reset(KEY) is None


async def test_mode_none_never_reports_or_rotates(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig(mode="none", idle_minutes=1))
    old = await index.resolve(KEY, message())
    await set_last_active(store, KEY, time.time() - 365 * 86400)
    assert await index.due_reset(KEY) is None
    assert (await index.resolve(KEY, message())).session_id == old.session_id


async def test_due_reset_without_binding_is_none(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig(mode="both", idle_minutes=1))
    assert await index.due_reset(KEY) is None


# ------------------------------------------------------------- healing


async def test_entry_pointing_at_an_ended_session_is_healed(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig())
    old = await index.resolve(KEY, message())
    await store.end_session(old.session_id, "closed_elsewhere")
    assert await index.current(KEY) is None
    assert await index.due_reset(KEY) is None
    new = await index.resolve(KEY, message())
    assert new.created is True and new.session_id != old.session_id
    assert new.previous_session_id == old.session_id and new.reset_reason is None
    assert (await session(store, new.session_id))["ended_at"] is None
    assert (await session(store, old.session_id))["end_reason"] == "closed_elsewhere"  # not rewritten
    assert await index.current(KEY) == new.session_id


async def test_entry_pointing_at_a_deleted_session_is_healed(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig(mode="idle", idle_minutes=1))
    old = await index.resolve(KEY, message())
    assert await store.delete_session(old.session_id) is True
    assert (await index_row(store, KEY)) is not None  # the entry is stale now
    await set_last_active(store, KEY, time.time() - 3600)  # and would be "due" if it were followed
    assert await index.current(KEY) is None
    assert await index.due_reset(KEY) is None
    new = await index.resolve(KEY, message())
    assert new.created is True and new.session_id != old.session_id
    assert await store.get_session(old.session_id) is None
    assert (await session(store, new.session_id))["ended_at"] is None
    again = await index.resolve(KEY, message())
    assert again.session_id == new.session_id and again.created is False


# --------------------------------------------------------- rebind / new


async def test_rebind_points_key_at_existing_session_and_reopens_it(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig())
    older = await index.resolve(KEY, message())
    newer = await index.start_new(KEY, message(), "user_new")
    assert (await session(store, older.session_id))["ended_at"] is not None

    await index.rebind(KEY, older.session_id, message())
    reopened = await session(store, older.session_id)
    assert reopened["ended_at"] is None and reopened["end_reason"] is None
    assert await index.current(KEY) == older.session_id
    resolved = await index.resolve(KEY, message())
    assert resolved.session_id == older.session_id and resolved.created is False
    assert newer.session_id != older.session_id


async def test_rebind_a_new_key_without_message(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig())
    sid = (await index.resolve(KEY, message())).session_id
    other_key = "agent:main:otherchat:group:room%3A1:u7"
    await index.rebind(other_key, sid)
    row = await index_row(store, other_key)
    assert row is not None and row["session_id"] == sid and row["platform"] == "otherchat"
    assert await index.current(other_key) == sid


async def test_rebind_to_a_missing_session_fails_and_keeps_the_binding(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig())
    sid = (await index.resolve(KEY, message())).session_id
    with pytest.raises(SessionNotFoundError):
        await index.rebind(KEY, "20240101_000000_deadbeef", message())
    assert await index.current(KEY) == sid


async def test_start_new_ends_the_old_one_with_the_reason(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig())
    old = await index.resolve(KEY, message())
    new = await index.start_new(KEY, message(), "user_reset", model="m-2")
    assert new.created is True and new.previous_session_id == old.session_id
    assert new.session_id != old.session_id and SESSION_ID.match(new.session_id)
    ended = await session(store, old.session_id)
    assert ended["ended_at"] is not None and ended["end_reason"] == "user_reset"
    fresh = await session(store, new.session_id)
    assert (fresh["ended_at"], fresh["model"], fresh["source"]) == (None, "m-2", "testchat")
    assert await index.current(KEY) == new.session_id


async def test_start_new_without_a_binding(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig())
    new = await index.start_new(KEY, message(), "user_new")
    assert new.created is True and new.previous_session_id is None
    assert await index.current(KEY) == new.session_id


async def test_start_new_over_an_ended_session_keeps_its_reason(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig())
    old = await index.resolve(KEY, message())
    await store.end_session(old.session_id, "first_reason")
    new = await index.start_new(KEY, message(), "second_reason")
    assert new.previous_session_id == old.session_id
    assert (await session(store, old.session_id))["end_reason"] == "first_reason"


async def test_the_sweep_ends_due_sessions_only_where_the_key_still_points(store: StateStore) -> None:
    index = SessionIndex(store, SessionResetConfig(mode="idle", idle_minutes=30))
    other = "agent:main:testchat:dm:u2"
    due = await index.resolve(KEY, message())
    fresh = await index.resolve(other, message("u2"))
    await set_last_active(store, KEY, time.time() - 31 * 60)
    assert await index.due_resets() == [(KEY, due.session_id)]
    # A message rotated the key in between: the sweep leaves the new session alone.
    moved = await index.resolve(KEY, message())
    assert await index.end_if_due(KEY, due.session_id) is None
    assert (await session(store, moved.session_id))["ended_at"] is None
    # Due and still bound: ended with the policy's reason, the key kept for the next message to heal.
    await set_last_active(store, KEY, time.time() - 31 * 60)
    assert await index.end_if_due(KEY, moved.session_id) == "idle"
    assert (await session(store, moved.session_id))["end_reason"] == "session_reset:idle"
    assert await index.current(KEY) is None and await index.due_resets() == []
    assert await index.current(other) == fresh.session_id
