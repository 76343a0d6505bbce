"""Compression: the split plan, and a session split with lineage through a real turn."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from core._loop import budget_message
from core.compression import (
    SUMMARY_INSTRUCTIONS,
    SUMMARY_PREFIX,
    Plan,
    estimate_tokens,
    plan_split,
    recent_window,
    split_session_op,
)
from core.errors import CompressionError
from core.runtime import FLUSH_PROMPT
from storage import StateStore, ops
from tests.fakes.openai_server import FakeOpenAI, echo_last_user_message

from ._agent_env import (
    KEY,
    bound_session,
    db_messages,
    db_rows,
    make_client,
    make_runtime,
    new_session,
    request,
    sample_tools,
)


def _msgs(n: int, size: int = 400) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}:" + "x" * size} for i in range(n)]


def test_estimate_grows_with_text_and_tool_calls() -> None:
    small = estimate_tokens([{"role": "user", "content": "hi"}])
    big = estimate_tokens([{"role": "user", "content": "hi" * 400}])
    calls = estimate_tokens([{"role": "assistant", "content": None,
                              "tool_calls": [{"id": "a", "function": {"name": "x", "arguments": "{}" * 100}}]}])
    assert small < calls and small < big and big == 800 // 4 + 4


def test_plan_protects_head_and_tail() -> None:
    history = _msgs(20)
    plan = plan_split(history, head_messages=3, tail_tokens=350)
    assert plan.head == history[:3]
    assert plan.tail == history[-3:]  # each message is ~104 tokens
    assert plan.head + plan.middle + plan.tail == history


def test_plan_never_splits_tool_calls_from_results() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "e"}}]}
    result = {"role": "tool", "tool_call_id": "c", "content": "r" * 400}
    history = [*_msgs(2), call, result, *_msgs(6), call, result, result]
    plan = plan_split(history, head_messages=3, tail_tokens=120)
    assert plan.head == history[:4]  # the result joined its call
    assert plan.tail[0]["role"] != "tool"
    assert plan.head + plan.middle + plan.tail == history


def test_short_history_has_no_middle() -> None:
    plan = plan_split(_msgs(4), head_messages=3, tail_tokens=20_000)
    assert plan.middle == []


def test_keep_tokens_bound_the_tail_and_never_the_head() -> None:
    history = _msgs(40)  # ~104 tokens each
    unbounded = plan_split(history, head_messages=3, tail_tokens=20_000)
    assert unbounded.middle == []  # a 20k tail swallows everything: nothing to compress
    keep = estimate_tokens(history[:3]) + 5 * 104
    bounded = plan_split(history, head_messages=3, tail_tokens=20_000, keep_tokens=keep)
    assert bounded.head == history[:3]
    assert bounded.tail == history[-5:]
    assert sum(estimate_tokens([m]) for m in bounded.head + bounded.tail) <= keep
    starved = plan_split(history, head_messages=3, tail_tokens=20_000, keep_tokens=0)
    assert starved.head == history[:3] and starved.tail == history[-1:]  # the last message always stays


def test_recent_window_fits_the_budget_and_starts_cleanly() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "e"}}]}
    result = {"role": "tool", "tool_call_id": "c", "content": "r" * 400}
    history = [*_msgs(4), call, result, *_msgs(2)]
    window = recent_window(history, 2 * 104 + 104)  # the two messages and the tool result, not its call
    assert window == history[-2:]  # a result without its call would be refused by the provider
    assert recent_window(history, 10_000) == history
    assert recent_window(history, 50) == []


async def test_a_huge_kept_message_is_copied_cut_pointing_at_the_whole(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await new_session(store, title="Big answers")
    for m in _msgs(8, 300):
        await store.persist_message("s1", m)
    huge = "h" * 300_000  # the last answer: the tail always keeps it
    await store.persist_message("s1", {"role": "assistant", "content": huge})
    fake_openai.reply("nothing to save").reply("A long answer was given.")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), context_length=8192)
        outcome = await rt.compress(KEY, "s1")
    assert outcome.split is not None
    new_id = outcome.split.new_session_id
    copy = db_messages(db_path, new_id)[-1]["content"]
    assert copy.startswith("h" * 2000) and len(copy) < 10_000
    assert copy.endswith("the whole message is in session s1.]")
    assert f"{300_000 - len(copy.split(chr(10))[0])} more characters" in copy
    # The one whole copy is the original's.
    assert db_rows(db_path, "SELECT session_id FROM messages WHERE length(content) >= 300000") == [("s1",)]


async def _seed(store: StateStore, n: int = 12, size: int = 300) -> None:
    await new_session(store, title="Trip to Oslo")
    for m in _msgs(n, size):
        await store.persist_message("s1", m)


async def test_turn_past_the_threshold_splits_the_session(store: StateStore, db_path: Path,
                                                          fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await _seed(store)
    fake_openai.reply("nothing to save")  # the memory flush
    fake_openai.reply("The user plans a trip to Oslo in May.")  # the summary
    fake_openai.reply("Continuing in the new session.")
    async with make_client(fake_openai, auxiliary="aux-model") as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), context_length=2048, tail_tokens=200)
        result = await rt.agent(request("what next?")).run_turn(request("what next?"))
    assert result.text == "Continuing in the new session."
    flush, summary, turn = fake_openai.chat_requests
    assert [t["function"]["name"] for t in flush.body["tools"]] == ["memory"]
    assert flush.body["messages"][-1] == {"role": "user", "content": FLUSH_PROMPT}
    assert summary.body["model"] == "aux-model" and "tools" not in summary.body
    assert turn.body["model"] == "fake-model"

    (new_id, parent, title, prompt), = db_rows(
        db_path, "SELECT id, parent_session_id, title, system_prompt FROM sessions WHERE id != 's1'")
    assert parent == "s1" and title == "Trip to Oslo #2" and prompt
    assert db_rows(db_path, "SELECT end_reason FROM sessions WHERE id = 's1'") == [("compression",)]
    assert bound_session(db_path) == new_id
    assert len(db_messages(db_path, "s1")) == 12  # the old transcript is untouched
    new = db_messages(db_path, new_id)
    assert [m["content"][:3] for m in new[:3]] == ["0:x", "1:x", "2:x"]
    assert new[3]["content"] == f"{SUMMARY_PREFIX}\nThe user plans a trip to Oslo in May."
    assert new[-2:] == [
        {"role": "user", "content": "what next?", "tool_call_id": None, "tool_calls": None, "tool_name": None},
        {"role": "assistant", "content": "Continuing in the new session.", "tool_call_id": None,
         "tool_calls": None, "tool_name": None},
    ]
    sent = [m["content"] for m in turn.body["messages"]]
    assert sent[0] == prompt and SUMMARY_PREFIX in sent[4] and sent[-1] == "what next?"
    uncompressed = [turn.body["messages"][0], *_msgs(12, 300), turn.body["messages"][-1]]
    assert estimate_tokens(turn.body["messages"]) < estimate_tokens(uncompressed) - 400


async def test_compress_by_hand_and_twice_in_a_lineage(store: StateStore, db_path: Path,
                                                       fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await _seed(store)
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), tail_tokens=200)
        fake_openai.reply("nothing to save").reply("summary one")
        first = await rt.compress(KEY, "s1")
        assert first.split is not None and first.split.title == "Trip to Oslo #2"
        assert "Compressed" in first.reply and first.split.new_session_id in first.reply
        second_id = first.split.new_session_id
        for m in _msgs(10, 300):
            await store.persist_message(second_id, m)
        fake_openai.reply("nothing to save").reply("summary two")
        second = await rt.compress(KEY, second_id)
        assert second.split is not None and second.split.title == "Trip to Oslo #3"
        # The earlier summary is summarised again as such.
        assert "earlier summary:" in fake_openai.chat_requests[-1].body["messages"][1]["content"]
        short = await new_session(store, "short")
        assert (await rt.compress(KEY, short)).split is None


OVERFLOW = {"error": {"message": "This model's maximum context length is 8192 tokens.",
                      "code": "context_length_exceeded"}}


def _is_flush(body: dict[str, Any]) -> bool:
    return bool(body["messages"][-1].get("content") == FLUSH_PROMPT)


def _is_summary(body: dict[str, Any]) -> bool:
    return bool(body["messages"][0].get("content") == SUMMARY_INSTRUCTIONS)


async def test_context_overflow_from_the_provider_compresses_and_retries(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await _seed(store, 16, 600)  # ~154 tokens each: under our threshold, over the provider's count
    fake_openai.fail(400, OVERFLOW)  # the turn
    fake_openai.reply("nothing to save")  # the memory flush, shown only what fits
    fake_openai.reply("summary")
    fake_openai.reply("Fits now. \ud83d")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), context_length=6000, tail_tokens=200)
        result = await rt.agent(request("next")).run_turn(request("next"))
    assert result.text == "Fits now. \ufffd"  # a lone surrogate cannot be stored or sent
    new_id = bound_session(db_path)
    assert new_id is not None and new_id != "s1"
    stored = db_messages(db_path, new_id)
    assert [m["content"] for m in stored[-2:]] == ["next", "Fits now. \ufffd"]
    assert db_messages(db_path, "s1")[-1]["content"] == "next"  # the user's words were kept where they were said
    flush = fake_openai.chat_requests[1].body
    assert _is_flush(flush)
    # The flush sees the latest of the messages being summarised, within half the threshold, not the
    # whole history that just overflowed.
    shown = flush["messages"][1:-1]
    assert 0 < len(shown) < 13 and shown[-1]["content"].startswith("15:")
    assert estimate_tokens(flush["messages"]) <= rt.settings.compression_at // 2


async def test_the_retry_after_an_overflow_spends_what_is_left_of_the_budget(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await _seed(store)
    fake_openai.reply_tool_calls([{"name": "echo", "arguments": {"text": "a"}}])
    fake_openai.reply_tool_calls([{"name": "echo", "arguments": {"text": "b"}}])
    fake_openai.fail(400, OVERFLOW)
    fake_openai.reply("nothing to save").reply("summary")
    for _ in range(3):
        fake_openai.reply_tool_calls([{"name": "echo", "arguments": {"text": "c"}}])
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), tail_tokens=200, max_iterations=3)
        result = await rt.agent(request("go")).run_turn(request("go"))
    assert result.text == budget_message(3)
    turn_calls = [r for r in fake_openai.chat_requests if not _is_flush(r.body) and not _is_summary(r.body)]
    # Two answered calls, the refused one, then one more: three answered calls in the whole turn.
    assert len(turn_calls) == 4


async def _seed_many(store: StateStore, n: int) -> None:
    await new_session(store, title="Long chat")

    def op(conn: sqlite3.Connection) -> None:
        for m in _msgs(n):
            ops.append_message(conn, "s1", **ops.message_columns(m))

    await store.write(op)


def _session_ids(db: Path) -> list[str]:
    return [str(r[0]) for r in db_rows(db, "SELECT id FROM sessions ORDER BY started_at")]


@pytest.mark.parametrize("context_length", [16_384, 32_768])
async def test_small_context_window_splits_once_and_then_holds(
    context_length: int, store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    threshold = context_length // 2
    await _seed_many(store, threshold * 3 // 2 // 104)  # ~104 tokens a message: 1.5x the threshold
    fake_openai.reply("nothing to save").reply("The user and the assistant talked at length.")
    async with make_client(fake_openai) as client:
        # The default ~20k-token tail: on these windows it alone reaches (or passes) the threshold.
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), context_length=context_length)
        assert rt.settings.tail_tokens == 20_000
        await rt.agent(request("hello 0")).run_turn(request("hello 0"))
        (old, child) = _session_ids(db_path)
        assert bound_session(db_path) == child
        first_turn = fake_openai.chat_requests[-1].body
        assert not _is_flush(first_turn) and not _is_summary(first_turn)
        # The split leaves the session at no more than half the threshold: room for the turns that follow.
        assert estimate_tokens(first_turn["messages"]) <= threshold // 2
        for i in range(1, 4):
            result = await rt.agent(request(f"hello {i}", child)).run_turn(request(f"hello {i}", child))
            assert result.text == f"echo: hello {i}"
    assert _session_ids(db_path) == [old, child]  # no further split
    assert len(fake_openai.chat_requests) == 2 + 4
    assert db_rows(db_path, "SELECT ended_at IS NULL, title FROM sessions WHERE id = ?", child) == [(1, "Long chat #2")]


async def test_flush_and_summary_calls_are_booked_on_the_compressed_session(
    store: StateStore, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await _seed(store)
    fake_openai.reply("nothing to save", usage={"prompt_tokens": 300, "completion_tokens": 4})
    fake_openai.reply("summary", usage={"prompt_tokens": 900, "completion_tokens": 60,
                                        "completion_tokens_details": {"reasoning_tokens": 7}})
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), tail_tokens=200)
        outcome = await rt.compress(KEY, "s1")
    assert outcome.split is not None
    s1 = await store.get_session("s1")
    assert s1 is not None
    assert (s1["api_call_count"], s1["input_tokens"], s1["output_tokens"], s1["reasoning_tokens"]) == (
        2, 1200, 64, 7)


async def test_an_ended_session_is_never_split(store: StateStore, db_path: Path, fake_openai: FakeOpenAI,
                                               tmp_path: Path) -> None:
    await _seed(store)
    await store.end_session("s1", "session_reset:idle")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), tail_tokens=200)
        assert (await rt.compress(KEY, "s1")).split is None
    assert fake_openai.chat_requests == []
    # The transaction checks too: a session can end between the summary and the split.
    history = await store.get_messages_as_conversation("s1")
    plan = Plan(history[:3], history[3:-2], history[-2:])
    with pytest.raises(CompressionError, match="already ended"):
        await store.write(split_session_op("s1", plan, "summary", "prompt", "Trip to Oslo"))
    assert _session_ids(db_path) == ["s1"]


def _assert_chat_on_live_history(db: Path) -> str:
    """The chat's key points at a live session that holds the conversation."""
    sid = bound_session(db)
    assert sid is not None
    assert db_rows(db, "SELECT ended_at FROM sessions WHERE id = ?", sid) == [(None,)]
    contents = [m["content"] for m in db_messages(db, sid)]
    assert contents[0].startswith("0:x") and contents[-1].startswith("11:x")
    return sid


async def test_stop_while_the_split_commits_never_orphans_the_chat(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await _seed(store)
    release = threading.Event()
    submitted: list[int] = []
    holds: list[asyncio.Future[None]] = []

    def hold_writer(conn: sqlite3.Connection) -> None:
        release.wait()

    def responder(body: dict[str, Any]) -> str:
        if not _is_summary(body):
            return echo_last_user_message(body)
        # The writer is kept busy, so the split is still queued when /stop arrives.
        holds.append(asyncio.ensure_future(store.write(hold_writer)))
        submitted.append(store.writer.stats.submitted + 1)  # the hold counts once the loop submits it
        return "summary"

    fake_openai.responder = responder
    fake_openai.reply("nothing to save")
    try:
        async with make_client(fake_openai) as client:
            rt = make_runtime(store, client, tmp_path, tools=sample_tools(), context_length=2048, tail_tokens=200)
            turn = asyncio.create_task(rt.agent(request("next")).run_turn(request("next")))

            async def split_queued() -> None:
                while not submitted or store.writer.stats.submitted <= submitted[0]:
                    await asyncio.sleep(0.01)

            await asyncio.wait_for(split_queued(), 30)
            turn.cancel()
            release.set()
            # The cancelled turn ends only once the split is final, so nothing is read half-way.
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(turn, 30)
            await asyncio.wait_for(holds[0], 30)
    finally:
        release.set()
    child = _assert_chat_on_live_history(db_path)
    assert child != "s1"  # the split committed, and the chat moved with it
    assert db_rows(db_path, "SELECT parent_session_id FROM sessions WHERE id = ?", child) == [("s1",)]
    assert db_rows(db_path, "SELECT end_reason FROM sessions WHERE id = 's1'") == [("compression",)]


async def test_stop_during_the_summary_leaves_the_chat_where_it_was(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await _seed(store)
    fake_openai.reply("nothing to save").hang()
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), context_length=2048, tail_tokens=200)
        turn = asyncio.create_task(rt.agent(request("next")).run_turn(request("next")))

        async def summary_asked() -> None:
            while len(fake_openai.chat_requests) < 2:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(summary_asked(), 30)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(turn, 30)
    assert _assert_chat_on_live_history(db_path) == "s1"
    assert _session_ids(db_path) == ["s1"]


@pytest.mark.parametrize(("source", "hex_digits"), [("cli", 6), ("telegram", 8)])
async def test_a_compressed_session_keeps_the_id_form_of_its_source(store: StateStore, source: str,
                                                                    hex_digits: int) -> None:
    await store.create_session("t1", source)
    for m in _msgs(12, 50):
        await store.persist_message("t1", m)
    history = await store.get_messages_as_conversation("t1")
    plan = Plan(history[:3], history[3:-2], history[-2:])
    split = await store.write(split_session_op("t1", plan, "summary", "prompt", None))
    stamp, clock, suffix = split.new_session_id.split("_")
    assert (len(stamp), len(clock), len(suffix)) == (8, 6, hex_digits)
    int(suffix, 16)
