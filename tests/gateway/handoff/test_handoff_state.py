"""The handoff state machine on a real state.db: compare-and-set transitions only.

A late timeout may only fail a row nobody claimed; a claimed or completed row is
never overwritten; one live handoff per session; failed rows free the session.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from gateway.errors import HandoffInFlightError
from gateway.handoff import store as rows
from storage import GatewayError, StateStore, StorageError


async def _new(store: StateStore, session_id: str = "20250101_000000_abcdef01") -> int:
    def op(c: sqlite3.Connection) -> int:
        return rows.insert_pending(
            c, session_id=session_id, source_key="agent:main:api-server:dm:alice", source_platform="api-server",
            source_chat_id="alice", source_thread_id=None, target_platform="telegram", target_chat_id="-100",
        )

    return await store.write(op)


async def _state(store: StateStore, handoff_id: int) -> tuple[Any, ...]:
    row = await store.read(lambda c: rows.get(c, handoff_id))
    assert row is not None
    return row.state, row.error


async def test_a_timeout_never_overwrites_a_claimed_handoff(store: StateStore) -> None:
    hid = await _new(store)
    assert await store.write(lambda c: rows.claim(c, hid)) is True
    # The timeout fires late, after the claim: it changes nothing.
    assert await store.write(lambda c: rows.fail_if_pending(c, hid, "timed out")) is False
    assert await _state(store, hid) == ("claimed", None)
    assert await store.write(lambda c: rows.claim(c, hid)) is False  # a second claimer loses too
    assert await store.write(lambda c: rows.complete(c, hid, target_key="k")) is True
    assert await store.write(lambda c: rows.fail_if_pending(c, hid, "timed out")) is False
    assert await store.write(lambda c: rows.fail(c, hid, "late failure")) is False
    assert await _state(store, hid) == ("completed", None)


async def test_a_timeout_fails_an_unclaimed_handoff_and_the_claim_then_loses(store: StateStore) -> None:
    hid = await _new(store)
    assert await store.write(lambda c: rows.fail_if_pending(c, hid, "timed out waiting")) is True
    assert await store.write(lambda c: rows.claim(c, hid)) is False
    assert await _state(store, hid) == ("failed", "timed out waiting")


@pytest.mark.parametrize("first", ["claim", "timeout"])
@pytest.mark.parametrize("other_process_does", ["claim", "timeout"])
async def test_the_race_in_one_statement_order_either_way(
    store: StateStore, db_path: Any, first: str, other_process_does: str
) -> None:
    """The claim and the pending timeout race from two writers of state.db (our writer and a
    second process), in either order: whichever commits first wins, the other changes nothing,
    and a timeout that comes second never fails the claimed row."""
    hid = await _new(store)
    moves = {
        "claim": lambda c: rows.claim(c, hid),
        "timeout": lambda c: rows.fail_if_pending(c, hid, "timed out"),
    }

    def in_other_process(step: str) -> bool:
        other = sqlite3.connect(db_path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            moved = bool(moves[step](other))
            other.execute("COMMIT")
        finally:
            other.close()
        return moved

    async def run(step: str) -> bool:
        if step == other_process_does:
            return in_other_process(step)
        return bool(await store.write(moves[step]))

    second = "timeout" if first == "claim" else "claim"
    assert await run(first) is True
    assert await run(second) is False
    expected = ("claimed", None) if first == "claim" else ("failed", "timed out")
    assert await _state(store, hid) == expected


async def test_one_live_handoff_per_session_and_failed_rows_free_it(store: StateStore) -> None:
    hid = await _new(store)
    with pytest.raises(HandoffInFlightError) as info:
        await _new(store)
    assert isinstance(info.value, GatewayError) and "already being handed off" in str(info.value)
    await _new(store, "20250101_000000_other001")  # another session is independent
    assert await store.write(lambda c: rows.claim(c, hid))
    long_error = "x" * 5000
    assert await store.write(lambda c: rows.fail(c, hid, long_error))
    state, error = await _state(store, hid)
    assert state == "failed" and error == "x" * rows.ERROR_MAX_CHARS
    retry = await _new(store)  # the retry is a fresh row
    assert retry != hid and await _state(store, retry) == ("pending", None)


async def test_rows_left_live_by_a_dead_process_are_failed_at_start(store: StateStore) -> None:
    pending = await _new(store)
    claimed = await _new(store, "20250101_000000_other001")
    done = await _new(store, "20250101_000000_other002")
    await store.write(lambda c: rows.claim(c, claimed))
    await store.write(lambda c: rows.claim(c, done))
    await store.write(lambda c: rows.complete(c, done))
    assert await store.write(lambda c: rows.fail_interrupted(c, "restarted")) == 2
    assert await _state(store, pending) == ("failed", "restarted")
    assert await _state(store, claimed) == ("failed", "restarted")
    assert await _state(store, done) == ("completed", None)


async def test_the_schema_refuses_unknown_states(store: StateStore) -> None:
    hid = await _new(store)
    with pytest.raises(StorageError, match="CHECK constraint failed"):
        await store.write(lambda c: c.execute("UPDATE gateway_handoffs SET state = 'running' WHERE id = ?", (hid,)))
