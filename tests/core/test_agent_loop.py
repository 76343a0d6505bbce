"""The agent loop against FakeOpenAI over HTTP and a real state.db."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from core.llm import ModelClient, ModelSettings
from core.tools import Tool, ToolContext
from storage import StateStore
from tests.fakes.openai_server import FakeOpenAI

from ._agent_env import (
    ECHO,
    assert_consistent,
    db_messages,
    make_client,
    make_runtime,
    new_session,
    request,
    sample_tools,
)


async def test_tool_loop_with_several_calls_per_turn(store: StateStore, db_path: Path, fake_openai: FakeOpenAI,
                                                     tmp_path: Path) -> None:
    await new_session(store)
    fake_openai.reply_tool_calls(
        [{"id": "a", "name": "echo", "arguments": {"text": "one"}}, {"id": "b", "name": "echo",
                                                                       "arguments": {"text": "two"}}],
        content="Let me check.",
    )
    fake_openai.reply_tool_calls([{"id": "c", "name": "fail", "arguments": {}}])
    fake_openai.reply("All done.")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        result = await rt.agent(request("do it")).run_turn(request("do it"))
    assert result.text == "All done."
    stored = db_messages(db_path, "s1")
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "do it"),
        ("assistant", "Let me check."),
        ("tool", "echoed one"),
        ("tool", "echoed two"),
        ("assistant", None),
        ("tool", "Error: the disk is on fire; try another path"),
        ("assistant", "All done."),
    ]
    assert [m["tool_call_id"] for m in stored if m["role"] == "tool"] == ["a", "b", "c"]
    assert stored[2]["tool_name"] == "echo"
    assert len(result.message_ids) == 7 and result.message_ids == sorted(result.message_ids)
    # The model saw each result right after its call, and the tools array on every request.
    last = fake_openai.chat_requests[-1].body
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    assert {t["function"]["name"] for t in last["tools"]} >= {"echo", "memory", "session_search"}
    assert not any("finish_reason" in m or "token_count" in m for m in last["messages"])
    session = await store.get_session("s1")
    assert session is not None and session["tool_call_count"] == 3 and session["api_call_count"] == 3


async def test_iteration_budget_ends_with_a_clear_message(store: StateStore, db_path: Path,
                                                          fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await new_session(store)
    for i in range(3):
        fake_openai.reply_tool_calls([{"id": f"c{i}", "name": "echo", "arguments": {"text": str(i)}}])
    fake_openai.reply("never asked for")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), max_iterations=3)
        result = await rt.agent(request("loop")).run_turn(request("loop"))
    assert "I stopped after 3 steps" in result.text and "continue" in result.text
    assert len(fake_openai.chat_requests) == 3
    stored = db_messages(db_path, "s1")
    assert stored[-1]["role"] == "assistant" and stored[-1]["content"] == result.text
    assert_consistent(stored)


async def test_crashing_tool_and_unknown_tool_do_not_end_the_turn(store: StateStore, db_path: Path,
                                                                  fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await new_session(store)
    fake_openai.reply_tool_calls([{"id": "x", "name": "crash"}, {"id": "y", "name": "nope"},
                                  {"id": "z", "name": "echo", "arguments": "{broken"}])
    fake_openai.reply("Recovered.")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        result = await rt.agent(request("go")).run_turn(request("go"))
    assert result.text == "Recovered."
    tool_results = [m["content"] for m in db_messages(db_path, "s1") if m["role"] == "tool"]
    assert "failed unexpectedly (RuntimeError)" in tool_results[0]
    assert "no tool named 'nope'" in tool_results[1]
    assert "not a JSON object" in tool_results[2]


async def test_stop_cancels_the_turn_and_leaves_a_consistent_transcript(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    started = asyncio.Event()

    async def slow(args: Mapping[str, Any], ctx: ToolContext) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    slow_tool = Tool("slow", "slow", {"type": "object"}, slow)
    await new_session(store)
    fake_openai.reply_tool_calls([{"id": "e", "name": "echo", "arguments": {"text": "fast"}},
                                  {"id": "s", "name": "slow"}, {"id": "t", "name": "echo",
                                                                "arguments": {"text": "after"}}])
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=[ECHO, slow_tool])
        turn = asyncio.create_task(rt.agent(request("work")).run_turn(request("work")))
        await asyncio.wait_for(started.wait(), 10)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(turn, 10)
        stored = db_messages(db_path, "s1")
        assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool", "tool"]
        assert stored[2]["content"] == "echoed fast"
        assert [m["content"].startswith("Cancelled") for m in stored[3:]] == [True, True]
        assert_consistent(stored)
        # The conversation carries on from there; the provider gets a well-formed history.
        fake_openai.reply("Where were we?")
        result = await rt.agent(request("again")).run_turn(request("again"))
    assert result.text == "Where were we?"
    sent = fake_openai.chat_requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "tool", "user"]


async def test_history_left_dangling_by_a_crash_is_closed_on_the_next_turn(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await new_session(store)
    await store.persist_message("s1", {"role": "user", "content": "first"})
    calls = [{"id": "k1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]
    await store.persist_message("s1", {"role": "assistant", "content": None, "tool_calls": calls})
    fake_openai.reply("fine")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=[ECHO])
        await rt.agent(request("second")).run_turn(request("second"))
    stored = db_messages(db_path, "s1")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "user", "assistant"]
    assert stored[2]["tool_call_id"] == "k1" and stored[2]["content"].startswith("Cancelled")


async def test_rate_limit_then_success(store: StateStore, db_path: Path, fake_openai: FakeOpenAI,
                                       tmp_path: Path) -> None:
    await new_session(store)
    fake_openai.fail(429, headers={"Retry-After": "0"})
    fake_openai.reply("made it")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=[ECHO])
        result = await rt.agent(request("hi")).run_turn(request("hi"))
    assert result.text == "made it"
    assert len(fake_openai.chat_requests) == 2
    assert [m["content"] for m in db_messages(db_path, "s1")] == ["hi", "made it"]


async def test_usage_is_recorded_on_the_session(store: StateStore, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await new_session(store)
    usage = {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
             "prompt_tokens_details": {"cached_tokens": 40}, "completion_tokens_details": {"reasoning_tokens": 3}}
    fake_openai.reply_tool_calls([{"name": "echo", "arguments": {"text": "u"}}], usage=usage)
    fake_openai.reply("ok", usage=usage)
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=[ECHO])
        await rt.agent(request("hi")).run_turn(request("hi"))
    s = await store.get_session("s1")
    assert s is not None
    assert (s["input_tokens"], s["output_tokens"], s["cache_read_tokens"], s["reasoning_tokens"],
            s["api_call_count"]) == (200, 14, 80, 6, 2)


async def test_prompt_is_built_once_normalised_and_frozen(store: StateStore, db_path: Path,
                                                         fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "memories").mkdir(parents=True)
    (home / "memories" / "USER.md").write_text("Alice likes   tea.   \n\n\n\n")
    await new_session(store)
    fake_openai.reply_tool_calls([{"name": "memory", "arguments": {"action": "add", "target": "user",
                                                                    "content": "Alice lives in Oslo."}}])
    fake_openai.reply("Noted.")
    fake_openai.reply("Second answer.")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, home, tools=sample_tools())
        await rt.agent(request("remember Oslo")).run_turn(request("remember Oslo"))
        await rt.agent(request("and now?")).run_turn(request("and now?"))
        prompts = [r.body["messages"][0]["content"] for r in fake_openai.chat_requests]
        assert len(set(prompts)) == 1  # the memory write did not change the running prompt
        assert "Alice likes   tea." in prompts[0] and "Oslo" not in prompts[0]
        assert "\n\n\n" not in prompts[0] and not any(line != line.rstrip() for line in prompts[0].splitlines())
        session = await store.get_session("s1")
        assert session is not None and session["system_prompt"] == prompts[0]
        # On disk at once, and in the prompt of the next session.
        assert "Alice lives in Oslo." in (home / "memories" / "USER.md").read_text()
        await new_session(store, "s2")
        fake_openai.reply("hello again")
        await rt.agent(request("hi", "s2")).run_turn(request("hi", "s2"))
    assert "Alice lives in Oslo." in fake_openai.chat_requests[-1].body["messages"][0]["content"]


async def test_prompt_caching_markers_for_claude_only_on_a_copy(store: StateStore, db_path: Path,
                                                                fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await new_session(store)
    for i in range(3):
        await store.persist_message("s1", {"role": "user", "content": f"q{i}"})
        await store.persist_message("s1", {"role": "assistant", "content": f"a{i}"})
    fake_openai.reply("cached")
    async with make_client(fake_openai, model="anthropic/claude-sonnet-4") as client:
        rt = make_runtime(store, client, tmp_path, tools=[ECHO])
        await rt.agent(request("q3")).run_turn(request("q3"))
    sent = fake_openai.chat_requests[-1].body["messages"]
    marked = [i for i, m in enumerate(sent) if isinstance(m["content"], list)
              and m["content"][-1].get("cache_control") == {"type": "ephemeral"}]
    assert marked == [0, len(sent) - 3, len(sent) - 2, len(sent) - 1]
    # What is stored is plain text.
    assert all(isinstance(m["content"], str) for m in db_messages(db_path, "s1"))
    stored_prompt = (await store.get_session("s1") or {})["system_prompt"]
    assert isinstance(stored_prompt, str) and stored_prompt == sent[0]["content"][0]["text"]


async def test_a_one_hour_cache_ttl_rides_on_every_marker(store: StateStore, fake_openai: FakeOpenAI,
                                                           tmp_path: Path) -> None:
    """model.cache_ttl: 1h; the default (5m) sends the markers without a ttl, as the test above shows."""
    await new_session(store)
    settings = ModelSettings(base_url=fake_openai.base_url, model="anthropic/claude-sonnet-4", max_retries=0,
                             cache_ttl="1h")
    async with ModelClient(settings) as client:
        rt = make_runtime(store, client, tmp_path, tools=[ECHO])
        await rt.agent(request("x")).run_turn(request("x"))
    sent = fake_openai.chat_requests[-1].body["messages"]
    markers = [m["content"][-1]["cache_control"] for m in sent if isinstance(m["content"], list)]
    assert markers == [{"type": "ephemeral", "ttl": "1h"}] * 2  # the system prompt and the one message


def test_a_cache_ttl_the_provider_does_not_know_is_refused() -> None:
    with pytest.raises(ValueError, match=r"model\.cache_ttl"):
        ModelSettings(cache_ttl="2h")


async def test_no_markers_for_other_models(store: StateStore, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await new_session(store)
    async with make_client(fake_openai, model="gpt-4o") as client:
        rt = make_runtime(store, client, tmp_path, tools=[ECHO])
        await rt.agent(request("x")).run_turn(request("x"))
    assert "cache_control" not in json.dumps(fake_openai.chat_requests[-1].body)



async def test_unknown_tool_call_keys_are_stored_and_replayed(store: StateStore, db_path: Path,
                                                              fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    # Gemini's OpenAI-compatible API signs its reasoning on the call and refuses a replay without it.
    signature = {"google": {"thought_signature": "c2lnbmVkIHRob3VnaHQ="}}
    call = {"id": "g1", "type": "function", "extra_content": signature,
            "function": {"name": "echo", "arguments": json.dumps({"text": "hi"}), "strict": True}}
    fake_openai.respond(200, {
        "id": "chatcmpl-g", "object": "chat.completion", "created": 0, "model": "gemini-2.5-flash",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
    })
    fake_openai.reply("done").reply("again")
    await new_session(store)
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=[ECHO])
        await rt.agent(request("sign it")).run_turn(request("sign it"))
        await rt.agent(request("more")).run_turn(request("more"))  # a fresh agent, history from state.db
    (stored,) = [m for m in db_messages(db_path, "s1") if m["tool_calls"]]
    assert stored["tool_calls"] == [call]
    for sent in fake_openai.chat_requests[1:]:
        (replayed,) = [m for m in sent.body["messages"] if m.get("tool_calls")]
        assert replayed["tool_calls"] == [call]


async def test_the_prompt_is_read_from_disk_off_the_event_loop(store: StateStore, fake_openai: FakeOpenAI,
                                                               tmp_path: Path) -> None:
    # A FIFO as MEMORY.md: reading it blocks until someone writes. The writer below only writes once
    # the event loop has run other work meanwhile, which it cannot if the read happens on the loop.
    (tmp_path / "memories").mkdir()
    fifo = tmp_path / "memories" / "MEMORY.md"
    os.mkfifo(fifo)
    loop = asyncio.get_running_loop()
    loop_ran: list[bool] = []

    def feed() -> None:
        fd = os.open(fifo, os.O_WRONLY)  # returns once the prompt builder has opened the file
        try:
            probe = asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop)
            try:
                probe.result(timeout=30)  # only a deadlock guard: a free loop answers at once
                loop_ran.append(True)
            except TimeoutError:
                loop_ran.append(False)
            os.write(fd, b"The user's server is called atlas.")
        finally:
            os.close(fd)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    await new_session(store)
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        await rt.agent(request("hi")).run_turn(request("hi"))
    feeder.join(30)
    assert loop_ran == [True]
    assert "server is called atlas" in fake_openai.chat_requests[0].body["messages"][0]["content"]
