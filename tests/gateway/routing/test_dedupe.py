"""Inbound dedupe on a real state.db: claimed with a read, recorded with the question."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from gateway.routing.dedupe import Dedupe
from storage import StateStore


async def _seen(store: StateStore) -> list[tuple[str, str]]:
    rows = await store.read(lambda c: c.execute(
        "SELECT platform, delivery_key FROM gateway_inbound_seen ORDER BY delivery_key").fetchall())
    return [(r[0], r[1]) for r in rows]


async def test_a_claim_refuses_copies_until_it_is_released_or_recorded(store: StateStore) -> None:
    dedupe = Dedupe(store, retention_hours=72)
    first, second = await asyncio.gather(dedupe.claim("telegram", "u:1"), dedupe.claim("telegram", "u:1"))
    assert sorted([first, second]) == [False, True]  # two copies at once: one wins
    assert await dedupe.claim("slack", "u:1") is True  # keys are per platform

    dedupe.release("telegram", "u:1")  # never processed: a redelivery counts
    assert await dedupe.claim("telegram", "u:1") is True

    await dedupe.record("telegram", "u:1")  # answered without a turn
    assert await _seen(store) == [("telegram", "u:1")]
    assert await dedupe.claim("telegram", "u:1") is False


async def test_a_turns_record_commits_with_its_question_or_not_at_all(store: StateStore) -> None:
    dedupe = Dedupe(store, retention_hours=72)
    assert await dedupe.claim("discord", "m:1")
    record = dedupe.record_op("discord", "m:1")

    def question_refused(conn: sqlite3.Connection) -> None:
        record(conn)
        raise sqlite3.IntegrityError("the question could not be stored")

    with pytest.raises(Exception, match="could not be stored"):
        await store.write(question_refused)
    assert await _seen(store) == []  # rolled back with it: a redelivery will be taken
    dedupe.release("discord", "m:1")
    assert await dedupe.claim("discord", "m:1") is True

    await store.write(record)  # stored this time
    dedupe.release("discord", "m:1")
    assert await _seen(store) == [("discord", "m:1")]
    assert await dedupe.claim("discord", "m:1") is False  # a redelivery after a restart, too
    assert await Dedupe(store, retention_hours=72).claim("discord", "m:1") is False


async def test_a_turns_record_remembers_its_question_and_then_its_answer(store: StateStore) -> None:
    dedupe = Dedupe(store, retention_hours=72)
    await store.create_session("s1", "api-server")
    await store.append_message("s1", "user", "earlier")
    assert await dedupe.claim("api-server", "idem:a:k")
    asked = dedupe.question_op("api-server", "idem:a:k")
    question = await store.persist_message("s1", {"role": "user", "content": "the question"},
                                           also=lambda c: asked(c, "s1"))
    dedupe.release("api-server", "idem:a:k")
    seen = await dedupe.get("api-server", "idem:a:k")
    assert seen is not None and (seen.session_id, seen.question_id, seen.answer) == ("s1", question, None)
    assert await dedupe.question_open(seen)  # nothing came after it: a turn may still answer it

    await store.persist_message("s1", {"role": "assistant", "content": "the answer"},
                                also=dedupe.answer_op("api-server", "idem:a:k", "the answer, as sent"))
    seen = await dedupe.get("api-server", "idem:a:k")
    assert seen is not None and seen.answer == "the answer, as sent"
    await store.append_message("s1", "user", "a later question")
    assert not await dedupe.question_open(seen)  # the conversation moved on
    assert await dedupe.get("api-server", "idem:a:other") is None


async def test_settled_returns_when_the_claim_ends(store: StateStore) -> None:
    dedupe = Dedupe(store, retention_hours=72)
    await dedupe.settled("api-server", "k")  # nothing held: returns at once
    assert dedupe.hold("api-server", "k") and not dedupe.hold("api-server", "k")
    waiter = asyncio.create_task(dedupe.settled("api-server", "k"))
    await asyncio.sleep(0)
    assert not waiter.done() and dedupe.in_flight("api-server", "k")
    dedupe.release("api-server", "k")
    await asyncio.wait_for(waiter, 5)
    assert not dedupe.in_flight("api-server", "k")
