"""A streaming turn: the agent with a listener, against FakeOpenAI over HTTP and a real state.db."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from storage import StateStore
from tests.fakes.openai_server import FakeOpenAI

from ._agent_env import db_messages, db_rows, make_client, make_runtime, new_session, request, sample_tools
from ._listener import RecordingListener

USAGE = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}


def _script(fake: FakeOpenAI) -> None:
    fake.reply_tool_calls([{"id": "a", "name": "echo", "arguments": {"text": "one"}}],
                          content="Let me check that first.", usage=USAGE)
    fake.reply("All done, and here is the answer.", usage=USAGE)


async def test_a_streamed_turn_stores_what_an_unstreamed_one_does(store: StateStore, db_path: Path,
                                                                  fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await new_session(store, "plain", key=None)
    await new_session(store, "streamed", key=None)
    listener = RecordingListener()
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        _script(fake_openai)
        plain = await rt.agent(request("do it", "plain")).run_turn(request("do it", "plain"))
        _script(fake_openai)
        streaming = dataclasses.replace(request("do it", "streamed"), listener=listener)
        streamed = await rt.agent(streaming).run_turn(streaming)

    assert streamed.text == plain.text == "All done, and here is the answer."
    assert db_messages(db_path, "streamed") == db_messages(db_path, "plain")
    # The preamble was shown, then dropped when the call asked for a tool; the tool was announced.
    assert listener.kinds == ["text", "discard", "tool", "text"]
    assert ("tool", "echo") in listener.events and listener.shown == streamed.text
    assert [bool(r.body.get("stream")) for r in fake_openai.chat_requests] == [False, False, True, True]
    # Usage came from the streams' usage chunks, counted as for unstreamed calls.
    assert streamed.usage == plain.usage and streamed.usage.input_tokens == 80
    columns = "input_tokens, output_tokens, api_call_count, tool_call_count"
    assert (db_rows(db_path, f"SELECT {columns} FROM sessions WHERE id = 'streamed'")
            == db_rows(db_path, f"SELECT {columns} FROM sessions WHERE id = 'plain'") == [(80, 18, 2, 1)])


async def test_stop_mid_stream_stores_the_partial_answer_marked_stopped(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await new_session(store)
    fake_openai.tokens_per_second = 20
    fake_openai.reply(" ".join(f"word{i}" for i in range(400)))
    listener = RecordingListener(wait_for=3)
    streaming = dataclasses.replace(request("write a lot"), listener=listener)
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        turn = asyncio.create_task(rt.agent(streaming).run_turn(streaming))
        await asyncio.wait_for(listener.texts.wait(), 10)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(turn, 10)
        [stream] = fake_openai.streams
        await asyncio.wait_for(stream.ended.wait(), 10)
        assert stream.outcome == "client gone"

        shown = listener.shown
        assert shown.startswith("word0 word1 word2") and "word399" not in shown
        rows = db_rows(db_path, "SELECT role, content, finish_reason FROM messages WHERE session_id = 's1' ORDER BY id")
        assert rows == [("user", "write a lot", None), ("assistant", shown, "stopped")]
        # The next turn carries on from what was shown.
        fake_openai.tokens_per_second = None
        fake_openai.reply("Picking up again.")
        result = await rt.agent(request("go on")).run_turn(request("go on"))
    assert result.text == "Picking up again."
    sent = fake_openai.chat_requests[-1].body["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "write a lot"), ("assistant", shown), ("user", "go on")]


async def test_stop_before_any_text_stores_no_answer(store: StateStore, db_path: Path, fake_openai: FakeOpenAI,
                                                     tmp_path: Path) -> None:
    await new_session(store)
    hold = fake_openai.hold_when(lambda body: True)
    streaming = dataclasses.replace(request("hello"), listener=RecordingListener())
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        turn = asyncio.create_task(rt.agent(streaming).run_turn(streaming))
        await asyncio.wait_for(hold.arrived.wait(), 10)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(turn, 10)
    assert [m["role"] for m in db_messages(db_path, "s1")] == ["user"]
