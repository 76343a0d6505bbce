"""Compression: the split plan, and a session split with lineage through a real turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.compression import SUMMARY_PREFIX, estimate_tokens, plan_split
from storage import StateStore
from tests.fakes.openai_server import FakeOpenAI

from ._agent_env import (
    KEY,
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


async def _seed(store: StateStore, n: int = 12) -> None:
    await new_session(store, title="Trip to Oslo")
    for m in _msgs(n, 300):
        await store.persist_message("s1", m)


async def test_turn_past_the_threshold_splits_the_session(store: StateStore, db_path: Path,
                                                          fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await _seed(store)
    rebinds: list[tuple[str, str]] = []
    fake_openai.reply("nothing to save")  # the memory flush
    fake_openai.reply("The user plans a trip to Oslo in May.")  # the summary
    fake_openai.reply("Continuing in the new session.")
    async with make_client(fake_openai, auxiliary="aux-model") as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), rebinds=rebinds,
                          context_length=1024, tail_tokens=200)
        result = await rt.agent(request("what next?")).run_turn(request("what next?"))
    assert result.text == "Continuing in the new session."
    flush, summary, turn = fake_openai.chat_requests
    assert [t["function"]["name"] for t in flush.body["tools"]] == ["memory"]
    assert "being compressed" in flush.body["messages"][-1]["content"] or "compressed" in str(flush.body)
    assert summary.body["model"] == "aux-model" and "tools" not in summary.body
    assert turn.body["model"] == "fake-model"

    (new_id, parent, title, prompt), = db_rows(
        db_path, "SELECT id, parent_session_id, title, system_prompt FROM sessions WHERE id != 's1'")
    assert parent == "s1" and title == "Trip to Oslo #2" and prompt
    assert db_rows(db_path, "SELECT end_reason FROM sessions WHERE id = 's1'") == [("compression",)]
    assert rebinds == [(KEY, new_id)]
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


async def test_context_overflow_from_the_provider_compresses_and_retries(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await _seed(store)
    overflow = {"error": {"message": "This model's maximum context length is 8192 tokens.",
                          "code": "context_length_exceeded"}}
    fake_openai.fail(400, overflow)  # the turn
    fake_openai.fail(400, overflow)  # the memory flush sees the same long history
    fake_openai.reply("summary")
    fake_openai.reply("Fits now. \ud83d")
    rebinds: list[tuple[str, str]] = []
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), rebinds=rebinds, tail_tokens=200)
        result = await rt.agent(request("next")).run_turn(request("next"))
    assert result.text == "Fits now. \ufffd"  # a lone surrogate cannot be stored or sent
    (new_id,) = rebinds[0][1:]
    stored = db_messages(db_path, new_id)
    assert [m["content"] for m in stored[-2:]] == ["next", "Fits now. \ufffd"]
    assert db_messages(db_path, "s1")[-1]["content"] == "next"  # the user's words were kept where they were said
