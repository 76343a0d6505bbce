"""A session's history edited on a real state.db: /retry's superseded answers (kept as v11 rows,
left out of the history a model gets and of search) and /undo's exchanges (deleted with their
full-text rows, files' rows and marks, in one transaction, the session's counters lowered)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import StateStore, WriterSettings, attachments, history, ops, queries

SETTINGS = WriterSettings(synchronous="NORMAL")
SHA = "d" * 64


def _exchange(conn: sqlite3.Connection, sid: str, question: str, answer: str, *, tool: bool = False) -> None:
    ops.append_message(conn, sid, "user", question)
    if tool:
        ops.append_message(conn, sid, "assistant", None, tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "memory", "arguments": "{}"}}])
        ops.append_message(conn, sid, "tool", "saved", tool_call_id="c1", tool_name="memory")
    ops.append_message(conn, sid, "assistant", answer)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[StateStore]:
    s = StateStore(tmp_path / "state.db", writer_settings=SETTINGS)
    await s.open()
    try:
        await s.write(lambda c: ops.create_session(c, "s1", "telegram"))
        yield s
    finally:
        await s.close()


async def test_superseded_rows_stay_but_the_model_and_search_do_not_see_them(store: StateStore,
                                                                             tmp_path: Path) -> None:
    await store.write(lambda c: _exchange(c, "s1", "first question", "old zebra answer", tool=True))
    last = await store.read(lambda c: history.last_exchange(c, "s1"))
    assert last is not None and last.answered and len(last.answer_ids) == 3
    assert await store.write(lambda c: history.supersede(c, "s1", last.answer_ids, now=1.0)) == 3
    _, convo = await store.load_conversation("s1")
    assert convo == [{"role": "user", "content": "first question"}]
    assert await store.search_messages("zebra") == []
    assert [m["content"] for m in await store.get_messages("s1")][-1] == "old zebra answer"  # kept
    assert await store.read(lambda c: queries.recent_dialogue(c, "s1", 5)) == [
        {"role": "user", "content": "first question", "tool_calls": None}]
    now = await store.read(lambda c: history.last_exchange(c, "s1"))
    assert now is not None and not now.answered and now.answer_ids == ()
    # a reader of the reference schema sees an ordinary v11 row
    plain = sqlite3.connect(tmp_path / "state.db")
    assert plain.execute("SELECT role, content FROM messages WHERE content = 'old zebra answer'").fetchall() == [
        ("assistant", "old zebra answer")]
    plain.close()


async def test_a_retry_without_a_new_answer_restores_the_old_one(store: StateStore) -> None:
    await store.write(lambda c: _exchange(c, "s1", "q", "the old answer"))
    last = await store.read(lambda c: history.last_exchange(c, "s1"))
    assert last is not None
    await store.write(lambda c: history.supersede(c, "s1", last.answer_ids, now=1.0))
    # the failed attempt got as far as a tool call
    await store.write(lambda c: ops.append_message(c, "s1", "assistant", None, tool_calls=[
        {"id": "c9", "type": "function", "function": {"name": "x", "arguments": "{}"}}]))
    assert await store.write(lambda c: history.restore_if_unanswered(c, "s1", last.question_id, last.answer_ids,
                                                                     now=2.0))
    _, convo = await store.load_conversation("s1")
    assert convo == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "the old answer"}]
    # a new answer stands: nothing is restored
    await store.write(lambda c: history.supersede(c, "s1", last.answer_ids, now=3.0))
    await store.write(lambda c: ops.append_message(c, "s1", "assistant", "the new answer"))
    assert not await store.write(lambda c: history.restore_if_unanswered(c, "s1", last.question_id,
                                                                         last.answer_ids, now=4.0))


async def test_undo_deletes_exchanges_their_fts_rows_files_and_marks_at_once(store: StateStore) -> None:
    await store.write(lambda c: _exchange(c, "s1", "keep me", "kept"))
    await store.write(lambda c: _exchange(c, "s1", "drop giraffe", "dropped", tool=True))

    def with_file_and_mark(conn: sqlite3.Connection) -> None:
        mid = ops.append_message(conn, "s1", "user", "[image] drop too")
        attachments.add(conn, message_id=mid, session_id="s1", kind="image", mime="image/png", name="a.png",
                        size=3, sha256=SHA)
        answer = ops.append_message(conn, "s1", "assistant", "superseded one")
        history.supersede(conn, "s1", (answer,), now=1.0)
        ops.append_message(conn, "s1", "assistant", "new one")

    await store.write(with_file_and_mark)
    done = await store.write(lambda c: history.undo(c, "s1", 2))
    assert (done.exchanges, done.messages) == (2, 7)

    def counts(conn: sqlite3.Connection) -> tuple[int, ...]:
        return tuple(conn.execute(sql).fetchone()[0] for sql in (
            "SELECT COUNT(*) FROM messages", "SELECT COUNT(*) FROM messages_fts",
            "SELECT COUNT(*) FROM messages_fts_trigram", "SELECT COUNT(*) FROM gateway_attachments",
            "SELECT COUNT(*) FROM gateway_superseded", "SELECT message_count FROM sessions",
            "SELECT tool_call_count FROM sessions"))

    assert await store.read(counts) == (2, 2, 2, 0, 0, 2, 0)
    assert await store.search_messages("giraffe") == []
    more = await store.write(lambda c: history.undo(c, "s1", 1000))
    assert (more.exchanges, more.messages) == (1, 2)
    assert await store.write(lambda c: history.undo(c, "s1", 1)) == history.Undone(0, 0)


async def test_undo_fails_whole_or_not_at_all(store: StateStore) -> None:
    await store.write(lambda c: _exchange(c, "s1", "a", "b"))

    def undo_then_fail(conn: sqlite3.Connection) -> None:
        history.undo(conn, "s1", 1)
        raise RuntimeError("the disk went away")

    with pytest.raises(RuntimeError):
        await store.write(undo_then_fail)
    assert len(await store.get_messages("s1")) == 2
    assert await store.read(lambda c: c.execute("SELECT COUNT(*) FROM messages_fts").fetchone()[0]) == 2
