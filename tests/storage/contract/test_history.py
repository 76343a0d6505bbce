"""The ``history`` family on both backends: /retry's superseded answers (kept as rows, marked)
and /undo's exchanges (deleted with their files' rows and marks in one transaction, the session's
counters lowered) — the behaviours of tests/storage/test_history.py. What the model and search
leave out is the ``queries``/``search`` families' to test; here, the marks and the rows."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest

from storage import history as sqlite_history

from ._peek import count, messages, pg_server_first, session
from .conftest import Db

__all__ = ["pg_server_first"]  # the autouse fixture, imported to be found here

SHA = "d" * 64
CALL = [{"id": "c1", "type": "function", "function": {"name": "memory", "arguments": "{}"}}]


def _exchange(conn: Any, db: Db, sid: str, question: str, answer: str, *, tool: bool = False) -> None:
    db.m.ops.append_message(conn, sid, "user", question)
    if tool:
        db.m.ops.append_message(conn, sid, "assistant", None, tool_calls=CALL)
        db.m.ops.append_message(conn, sid, "tool", "saved", tool_call_id="c1", tool_name="memory")
    db.m.ops.append_message(conn, sid, "assistant", answer)


async def _start(db: Db, sid: str = "s1") -> None:
    await db.write(partial(db.m.ops.create_session, session_id=sid, source="telegram"))


async def _last(db: Db, sid: str = "s1") -> Any:
    return await db.read(partial(db.m.history.last_exchange, session_id=sid))


async def test_last_exchange_of_a_session(db: Db) -> None:
    await _start(db)
    assert await _last(db) is None
    assert await _last(db, "nobody") is None
    await db.write(lambda c: _exchange(c, db, "s1", "first", "one"))
    await db.write(lambda c: _exchange(c, db, "s1", "second", "two", tool=True))
    last = await _last(db)
    ids = [m["id"] for m in await messages(db, "s1")]
    assert last == sqlite_history.Exchange(ids[2], "second", tuple(ids[3:]), True, False)
    assert isinstance(last, sqlite_history.Exchange)  # the same class on both backends
    empty = await db.write(partial(db.m.ops.append_message, session_id="s1", role="user", content=None))
    assert await _last(db) == sqlite_history.Exchange(empty, "", (), False, False)


async def test_superseded_rows_stay_and_are_marked(db: Db) -> None:
    await _start(db)
    await _start(db, "s2")
    await db.write(lambda c: _exchange(c, db, "s1", "first question", "old zebra answer", tool=True))
    await db.write(lambda c: _exchange(c, db, "s2", "elsewhere", "other"))
    last = await _last(db)
    assert last is not None and last.answered and len(last.answer_ids) == 3
    other = [m["id"] for m in await messages(db, "s2")]
    # a message of another session is not this session's to mark
    assert await db.write(partial(db.m.history.supersede, session_id="s1", message_ids=(*last.answer_ids,
                                                                                         other[1]), now=1.0)) == 3
    assert await db.write(partial(db.m.history.supersede, session_id="s1", message_ids=last.answer_ids,
                                  now=2.0)) == 0  # marked already
    assert await db.write(partial(db.m.history.supersede, session_id="s1", message_ids=(), now=2.0)) == 0
    assert await db.read(partial(db.m.history.superseded_ids, session_id="s1")) == set(last.answer_ids)
    assert await db.read(partial(db.m.history.superseded_ids, session_id="s2")) == set()
    assert [m["content"] for m in await messages(db, "s1")][-1] == "old zebra answer"  # kept
    now = await _last(db)
    assert now is not None and not now.answered and now.answer_ids == () and now.retried


async def test_a_retry_without_a_new_answer_restores_the_old_one(db: Db) -> None:
    await _start(db)
    await db.write(lambda c: _exchange(c, db, "s1", "q", "the old answer"))
    last = await _last(db)
    assert last is not None
    await db.write(partial(db.m.history.supersede, session_id="s1", message_ids=last.answer_ids, now=1.0))
    # the failed attempt got as far as a tool call
    failed = await db.write(partial(db.m.ops.append_message, session_id="s1", role="assistant", content=None,
                                    tool_calls=CALL))
    restore = partial(db.m.history.restore_if_unanswered, session_id="s1", question_id=last.question_id,
                      old_ids=last.answer_ids)
    assert await db.write(partial(restore, now=2.0))
    assert await db.read(partial(db.m.history.superseded_ids, session_id="s1")) == {failed}
    again = await _last(db)
    assert again is not None and again.answer_ids == last.answer_ids and again.answered
    # a new answer stands: nothing is restored
    await db.write(partial(db.m.history.supersede, session_id="s1", message_ids=last.answer_ids, now=3.0))
    await db.write(partial(db.m.ops.append_message, session_id="s1", role="assistant", content="the new answer"))
    assert not await db.write(partial(restore, now=4.0))
    # nor when the exchange is not the last one any more
    await db.write(lambda c: _exchange(c, db, "s1", "next", "answer"))
    assert not await db.write(partial(restore, now=5.0))
    assert not await db.write(partial(db.m.history.restore_if_unanswered, session_id="nobody", question_id=1,
                                      old_ids=(), now=6.0))


async def test_undo_deletes_exchanges_their_files_and_marks_at_once(db: Db) -> None:
    await _start(db)
    await db.write(lambda c: _exchange(c, db, "s1", "keep me", "kept"))
    await db.write(lambda c: _exchange(c, db, "s1", "drop giraffe", "dropped", tool=True))

    def with_file_and_mark(conn: Any) -> None:
        mid = db.m.ops.append_message(conn, "s1", "user", "[image] drop too")
        db.m.attachments.add(conn, message_id=mid, session_id="s1", kind="image", mime="image/png", name="a.png",
                             size=3, sha256=SHA)
        answer = db.m.ops.append_message(conn, "s1", "assistant", "superseded one")
        db.m.history.supersede(conn, "s1", (answer,), now=1.0)
        db.m.ops.append_message(conn, "s1", "assistant", "new one")

    await db.write(with_file_and_mark)
    done = await db.write(partial(db.m.history.undo, session_id="s1", exchanges=2))
    assert (done.exchanges, done.messages) == (2, 7)
    assert isinstance(done, sqlite_history.Undone)
    assert [await count(db, t) for t in ("messages", "gateway_attachments", "gateway_superseded")] == [2, 0, 0]
    s = await session(db, "s1")
    assert s is not None and (s["message_count"], s["tool_call_count"]) == (2, 0)
    more = await db.write(partial(db.m.history.undo, session_id="s1", exchanges=1000))
    assert (more.exchanges, more.messages) == (1, 2)
    assert await db.write(partial(db.m.history.undo, session_id="s1", exchanges=1)) == sqlite_history.Undone(0, 0)
    assert await db.write(partial(db.m.history.undo, session_id="nobody", exchanges=1)) == sqlite_history.Undone(0, 0)
    await db.write(lambda c: _exchange(c, db, "s1", "a", "b"))
    assert await db.write(partial(db.m.history.undo, session_id="s1", exchanges=0)) == sqlite_history.Undone(0, 0)
    assert await count(db, "messages") == 2


async def test_undo_fails_whole_or_not_at_all(db: Db) -> None:
    await _start(db)
    await db.write(lambda c: _exchange(c, db, "s1", "a", "b"))

    def undo_then_fail(conn: Any) -> None:
        db.m.history.undo(conn, "s1", 1)
        raise RuntimeError("the disk went away")

    with pytest.raises(RuntimeError):
        await db.write(undo_then_fail)
    assert len(await messages(db, "s1")) == 2
    s = await session(db, "s1")
    assert s is not None and s["message_count"] == 2


async def test_undo_while_messages_are_appended_keeps_the_counters_right(db: Db) -> None:
    await _start(db)
    for i in range(5):
        await db.write(partial(_exchange, db=db, sid="s1", question=f"q{i}", answer=f"a{i}", tool=True))
    appends = [db.write(partial(db.m.ops.append_message, session_id="s1", role="assistant", content=f"x{i}",
                                tool_calls=CALL)) for i in range(20)]
    undos = [db.write(partial(db.m.history.undo, session_id="s1", exchanges=1)) for _ in range(3)]
    await asyncio.gather(*appends, *undos)
    s = await session(db, "s1")
    left = await messages(db, "s1")
    calls = sum(1 for m in left if m["tool_calls"])
    assert s is not None and (s["message_count"], s["tool_call_count"]) == (len(left), calls)
